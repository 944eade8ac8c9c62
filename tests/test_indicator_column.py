"""Indicator columns read without copying whole columns, with the same answers as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.evidence.facts import indicator_column, indicator_values
from sdc_magic.linking.edits import values_of


def _reference(col: pd.Series) -> tuple[np.ndarray, tuple[float, float]] | None:
    """The whole column converted, then asked (what linking did before)."""
    values = col.to_numpy(dtype=float) if pd.api.types.is_bool_dtype(col) else \
        pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    found = indicator_values(values)
    return None if found is None else (values, found)


def _columns() -> dict[str, pd.Series]:
    rng = np.random.default_rng(4)
    n = 10_000
    flag = rng.integers(0, 2, n)
    late_third = flag.astype(float)
    late_third[9_000] = 2.0  # a third value only after the rows looked at first
    coded = np.where(flag == 1, 2, 1)
    with_nan = flag.astype(float)
    with_nan[::7] = np.nan
    return {
        "amounts": pd.Series(rng.lognormal(3, 1, n)),
        "flag": pd.Series(flag),
        "late third value": pd.Series(late_third),
        "1/2 coding": pd.Series(coded),
        "booleans": pd.Series(flag == 1),
        "nullable": pd.Series(pd.array(np.where(flag == 1, 1, 0), dtype="Int64")).where(flag < 2),
        "flag with missing": pd.Series(with_nan),
        "text digits": pd.Series(np.where(flag == 1, "1", "0").astype(object)),
        "text mixed": pd.Series(np.where(flag == 1, "1", "x").astype(object)),
        "all missing": pd.Series(np.full(n, np.nan)),
        "one value": pd.Series(np.ones(n)),
        "few rows, three values": pd.Series([0.0, 1.0, 5.0]),
    }


@pytest.mark.parametrize("name", list(_columns()))
def test_indicator_column_answers_as_the_whole_column_did(name: str) -> None:
    col = _columns()[name]
    got, want = indicator_column(col), _reference(col)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert got[1] == want[1]
        np.testing.assert_array_equal(got[0], want[0])


def test_the_published_values_kept_are_a_copy_of_the_users_column() -> None:
    frame = pd.DataFrame({"v": np.arange(6, dtype=float)})
    rows = np.arange(6)
    kept = values_of(frame, "v", rows, np.zeros(6, dtype=np.int64))
    assert kept is not None and kept.numbers is not None
    before = kept.numbers.copy()
    assert not np.shares_memory(kept.numbers, frame["v"].to_numpy())
    frame.loc[2, "v"] = 100.0  # the user's column changed in place after the display
    np.testing.assert_array_equal(kept.numbers, before)
