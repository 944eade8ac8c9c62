"""The linking rows of a DuckDB query come through Arrow (ten times faster than ``df()`` at 1M
rows) with the fingerprints ``df()`` gives: every type, with and without nulls."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from sdc_magic.capture.duckdb.arrow_rows import linking_frame  # noqa: E402
from sdc_magic.linking.identity import hash_column  # noqa: E402

COLUMNS = {
    "i8": "1::TINYINT", "i16": "2::SMALLINT", "i32": "3::INTEGER", "i64": "4::BIGINT", "u32": "5::UINTEGER",
    "f32": "1.5::FLOAT", "f64": "2.25::DOUBLE", "dec": "12.34::DECIMAL(10,2)", "bigdec": "1.5::DECIMAL(30,3)",
    "b": "true", "s": "'Wadi Fira'", "dt": "DATE '2024-02-29'", "ts": "TIMESTAMP '2024-02-29 10:11:12.5'",
    "e": "'y'::mood", "lst": "[1, 2]", "st": "{'a': 1}", "tstz": "TIMESTAMPTZ '2024-01-01 00:00:00+00'",
    "iv": "INTERVAL 3 DAY", "blob": "'\\x01'::BLOB", "hi": "170141183460469231731687303715884105727::HUGEINT",
}


@pytest.fixture
def con():
    c = duckdb.connect()
    c.sql("CREATE TYPE mood AS ENUM ('x', 'y')")
    yield c
    c.close()


@pytest.mark.parametrize("with_nulls", [False, True])
@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_each_type_hashes_as_through_df(con, name: str, with_nulls: bool) -> None:
    value = COLUMNS[name]
    rows = [f"SELECT {value} AS c, {k} AS k" for k in range(5)]
    if with_nulls:
        rows.append("SELECT NULL AS c, 9 AS k")
    rel = con.sql(" UNION ALL ".join(rows) + " ORDER BY k")
    expected, got = rel.df(), linking_frame(rel)
    assert list(got.columns) == list(expected.columns)
    for c in expected.columns:
        assert np.array_equal(hash_column(got[c]), hash_column(expected[c])), (name, c, got[c].dtype,
                                                                                expected[c].dtype)


def test_a_frame_of_many_rows_matches_df_and_keeps_the_column_names(con) -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    source = pd.DataFrame({"region": rng.choice(["a", "b", None], n), "size": rng.integers(0, 6, n),
                           "turnover": rng.lognormal(3, 1, n), "x": rng.integers(0, 3, n)})
    source.loc[source.x == 0, "size"] = None
    con.register("t", source)
    rel = con.sql('SELECT region, size, turnover, size + 1 AS "size", hash(region) AS h FROM t')
    expected, got = rel.df(), linking_frame(rel)
    assert list(got.columns) == list(expected.columns)
    for j in range(expected.shape[1]):
        assert np.array_equal(hash_column(got.iloc[:, j]), hash_column(expected.iloc[:, j]))


def test_a_failing_arrow_fetch_falls_back_to_df() -> None:
    class Rel:
        def to_arrow_table(self):
            raise RuntimeError("no arrow here")

        def df(self):
            return pd.DataFrame({"a": [1]})

    assert linking_frame(Rel()).equals(pd.DataFrame({"a": [1]}))
