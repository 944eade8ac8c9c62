"""Linking's polars count grouped first by the columns its expressions read (``capture/polars/grouping``)
gives the frame of the direct ``group_by``, row for row and type for type, and is used only when
every expression is elementwise and the columns are few and of exact types."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from linking_checks import grouped_first_changes_nothing, published, rates_people

from sdc_magic.capture import grouping_rule
from sdc_magic.capture.polars import grouping, lineage
from sdc_magic.evidence import rows as row_limits


@pytest.fixture
def frame() -> pl.DataFrame:
    rng = np.random.default_rng(5)
    n = 20_000
    grouping._distinct.clear()
    grouping._rows.clear()
    return pl.DataFrame({
        "district": pl.Series(rng.choice(["A", "B", "Île", None], n).tolist(), dtype=pl.String),
        "sex": pl.Series(rng.choice(["F", "M"], n).tolist(), dtype=pl.Categorical),
        "age": pl.Series(np.where(rng.random(n) < 0.02, None, rng.integers(0, 100, n)).tolist(), dtype=pl.Int64),
        "flag": rng.integers(0, 2, n), "income": rng.lognormal(5, 1, n),
        "day": pl.Series(np.datetime64("2026-01-01") + rng.integers(0, 30, n).astype("timedelta64[D]")),
        "n": rng.integers(0, 3, n),
    })


def _expressions(rng: np.random.Generator, k: int) -> list[Any]:
    a, d = int(rng.integers(0, 100)), int(rng.integers(1, 29))
    pool = [pl.col("district"), pl.col("sex"), (pl.col("age") >= a).fill_null(False),
            ((pl.col("age") < a) & (pl.col("flag").cast(pl.Float64) == 1.0)).fill_null(False),
            pl.when(pl.col("age").is_null()).then(pl.lit("none")).when(pl.col("age") < a).then(pl.lit("young"))
            .otherwise(pl.lit("old")), pl.col("district").is_in(["A", "Île"]), pl.col("age") // 10,
            pl.col("day") < pl.lit(np.datetime64(f"2026-01-{d:02d}")), pl.col("n") >= 1, pl.lit(True),
            ~pl.col("district").is_null()]
    return [pool[int(rng.integers(0, len(pool)))] for _ in range(k)]


@pytest.mark.parametrize("seed", range(8))
def test_grouped_first_is_the_direct_count(frame: pl.DataFrame, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)  # (any number of combinations)
    monkeypatch.setattr(grouping_rule, "MOST_COMBINATIONS", 10**9)
    rng = np.random.default_rng(seed)
    expressions = [lineage.written([], e) for e in _expressions(rng, int(rng.integers(2, 30)))]
    values = [[], [lineage.written([], pl.col("flag"))], [lineage.written([], pl.col("income")),
                                                           lineage.written([], pl.col("n") * 2)]][seed % 3]
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 10**9)
    direct = lineage.count_query(frame, expressions, values)
    used: list[Any] = []
    real = grouping.first_by
    monkeypatch.setattr(grouping, "first_by", lambda *a: used.append(r := real(*a)) or r)
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    grouped = lineage.count_query(frame, expressions, values)
    assert used and used[0]
    pd.testing.assert_frame_equal(grouped, direct, check_exact=True)


@pytest.mark.parametrize("expression", [
    pl.col("age").rank() > 3,  # depends on the other rows
    pl.col("age").shift(1) > 3,
    pl.col("age").cum_sum() > 3,
    (pl.col("age") > pl.col("age").mean()),  # an aggregate
    pl.col("age").over("sex") > 3,  # a window
    pl.col("age").sort() > 3,
    pl.col("age").fill_null(strategy="forward") > 3,
    pl.col("income") > 3,  # a float column: -0.0 and 0.0 one group
])
def test_what_is_not_elementwise_is_never_grouped_first(frame: pl.DataFrame, expression: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)
    assert grouping.first_by(frame.lazy(), "id", "[]", [pl.col("sex"), expression]) is None


def test_grouped_first_only_when_it_pays(frame: pl.DataFrame) -> None:
    many = [(pl.col("age") >= a).fill_null(False) for a in range(20)] + [pl.col("sex")]
    assert sorted(grouping.first_by(frame.lazy(), "id", "[]", many) or []) == ["age", "sex"]
    assert grouping.first_by(frame.lazy(), "id", "[]", many[:5]) is None  # few expressions
    renamed = frame.rename({"sex": "_sdc_n"})
    assert grouping.first_by(renamed.lazy(), "id2", "[]", many[:-1] + [pl.col("_sdc_n")]) is None


def _rates_session(first_from: int, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", first_from)
    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)  # (counted in polars)
    grouping._distinct.clear()
    grouping._rows.clear()
    p = pl.from_pandas(rates_people())

    def table(i: int) -> pl.DataFrame:  # (filtered while the session captures, as in a notebook)
        sub = p.filter(pl.col("age") >= (i * 13) % 90) if i % 3 else p
        return sub.group_by("district", "sex").agg(pl.len().alias("n"), pl.col("flag").mean()).sort("district", "sex")

    return published([lambda i=i: table(i) for i in range(8)])


def test_a_session_is_checked_the_same_grouped_first_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    grouped = grouped_first_changes_nothing(grouping, lambda first_from: _rates_session(first_from, monkeypatch),
                                            monkeypatch)
    assert {status for status, _ in grouped} >= {"suppressed"}


def test_a_panic_of_polars_falls_back_to_the_direct_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team, stop 65: a Decimal column times a null literal is typed Decimal but holds other data;
    ``approx_n_unique`` over it panicked (a ``BaseException``, not caught by ``except Exception``) and
    the display raised. Now the direct count decides."""
    root = pl.DataFrame({"dec": pl.Series([1, 2, 3, 4]).cast(pl.Decimal(10, 2)), "i": [0, 1, 0, 1]})
    steps = [lineage.written_step("with_columns", (), {"k": pl.col("dec") * pl.lit(None)})]
    exprs = [lineage.written(steps, e) for e in [pl.col("k"), pl.col("i")] + [pl.col("i") > j for j in range(10)]]
    grouping._distinct.clear()
    grouping._rows.clear()
    grouped = lineage.count_query(root, exprs)
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 10**9)
    pd.testing.assert_frame_equal(grouped, lineage.count_query(root, exprs))


def test_a_series_literal_is_not_elementwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Series literal lines up with the rows by position: grouped first it would not."""
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    root = pl.DataFrame({"i": [j % 3 for j in range(100)]})
    assert grouping.first_by(root.lazy(), "id", "[]", [pl.col("i") + pl.lit(pl.Series(range(100)))]) is None
