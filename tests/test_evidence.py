"""Captured evidence equals what a brute-force computation from the microdata gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.capture import Capture
from sdc_magic.config import preset
from sdc_magic.evidence.facts import top_k
from sdc_magic.evidence.flatten import flatten
from sdc_magic.evidence.registry import Registry


@pytest.fixture
def capture():
    registry = Registry()
    state = {"rules": preset("humanitarian")}
    cap = Capture(registry, lambda: state["rules"])
    cap.install()
    yield registry, state, cap
    cap.uninstall()


def _evidence(registry: Registry, obj):
    match = registry.match(flatten(obj), obj)
    assert match is not None, "displayed object not matched to its evidence"
    return match.entry.evidence.take(match.positions)


def _microdata(seed: int = 3, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "region": rng.choice(["N", "C", "S"], n),
        "kind": rng.choice(["harp", "piano", "organ", "other"], n, p=[0.1, 0.3, 0.1, 0.5]),
        "firm": rng.integers(0, 120, n).astype(str),
        "sales": np.round(rng.lognormal(2, 1.2, n), 2),
    })


def test_top_k_matches_sorting() -> None:
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 50, 5000)
    values = rng.normal(size=5000) * 10
    got = top_k(groups, values, 50, 3)
    for g in range(50):
        expect = np.sort(np.abs(values[groups == g]))[::-1][:3]
        np.testing.assert_allclose(got[g, : len(expect)], expect)
        assert np.isnan(got[g, len(expect):]).all()


@pytest.mark.parametrize("unit", [None, "firm"])
def test_groupby_sum_evidence_per_unit(capture, unit) -> None:
    registry, state, _ = capture
    state["rules"] = preset("insee").replace(unit=unit)
    df = _microdata()
    result = df.groupby(["region", "kind"])["sales"].sum()
    ev = _evidence(registry, result.unstack())
    table = result.unstack()
    flat = flatten(table)
    for i in range(len(flat)):
        region, kind = flat.dims["region"][i], flat.dims["kind"][i]
        rows = df[(df.region == region) & (df.kind == kind)]
        per_unit = rows.groupby(unit)["sales"].sum() if unit else rows["sales"]
        assert ev.units[i] == len(per_unit)
        assert ev.total[i] == pytest.approx(per_unit.sum())
        expect = np.sort(per_unit.abs().to_numpy())[::-1][:2]
        np.testing.assert_allclose(ev.top[i, : len(expect)], expect)


def test_distinct_units_for_counts(capture) -> None:
    registry, state, _ = capture
    state["rules"] = preset("humanitarian").replace(unit="firm")
    df = _microdata()
    table = pd.crosstab(df.region, df.kind)
    # without a way to find the frame behind the Series, rows are counted and the table says so
    assert "unit column 'firm' not found" in registry.match(flatten(table), table).entry.notes[0]
    capture_obj = capture[2]
    # in IPython the user's namespace is searched (``every``: every frame the keys could come from)
    capture_obj.frame_finder = lambda index, unit, every=False: [df] if every else df
    table = pd.crosstab(df.region, df.kind)
    ev = _evidence(registry, table)
    flat = flatten(table)
    for i in range(len(flat)):
        rows = df[(df.region == flat.dims["region"][i]) & (df.kind == flat.dims["kind"][i])]
        assert ev.units[i] == rows.firm.nunique()
        assert flat.values[i] == len(rows)


def test_reshapes_keep_their_evidence(capture) -> None:
    registry, _, _ = capture
    df = _microdata()
    base = df.groupby(["region", "kind"]).size()
    for shown in (base.unstack(), base.unstack().T, base.sort_values().head(4), base.unstack().stack(),
                  base.unstack().loc[["N", "S"]], base.unstack().iloc[:, :2], base.unstack().fillna(0),
                  base.unstack().astype(float), base.to_frame("n"), base.rename("count")):
        ev = _evidence(registry, shown)
        values = flatten(shown).values.astype(float)
        np.testing.assert_array_equal(ev.units, np.nan_to_num(values))


def test_crosstab_margins_and_normalize(capture) -> None:
    registry, _, _ = capture
    df = _microdata()
    table = pd.crosstab(df.region, df.kind, margins=True)
    ev = _evidence(registry, table)
    np.testing.assert_array_equal(ev.units, flatten(table).values.astype(float))
    assert ev.is_margin.sum() == table.shape[0] + table.shape[1] - 1
    shares = pd.crosstab(df.region, df.kind, normalize="index")
    ev = _evidence(registry, shares)
    counts = pd.crosstab(df.region, df.kind)
    np.testing.assert_array_equal(ev.units, flatten(counts).values.astype(float))
    assert set(ev.stat) == {"proportion"}


def test_pivot_table_several_values_and_aggfuncs(capture) -> None:
    registry, _, _ = capture
    df = _microdata().assign(units=1)
    table = df.pivot_table(index="region", columns="kind", values=["sales", "units"], aggfunc=["sum", "max"])
    ev = _evidence(registry, table)
    stats = set(ev.stat)
    assert stats == {"sum", "max"}
    flat = flatten(table)
    counts = df.groupby(["region", "kind"]).size()
    for i in range(len(flat)):
        assert ev.units[i] == counts[(flat.dims["region"][i], flat.dims["kind"][i])]


def test_wrapped_calls_return_the_same_objects_as_pandas(capture) -> None:
    registry, _, _ = capture
    df = _microdata()
    gb = df.groupby("region")
    assert registry.failures == []
    pd.testing.assert_series_equal(gb.size(), df.groupby("region").size())
    assert len(registry) >= 1


@pytest.mark.parametrize("case", ["every_row", "rows_outside", "missing_values", "negatives", "flag", "coded_1_2",
                                  "unit"])
def test_group_evidence_is_that_of_each_groups_rows(case: str) -> None:
    """Units, totals, absolute totals, negatives, largest values and indicator counts per group are
    those of the group's rows, whichever shortcut the computation takes (every row in a group, no
    missing value, no negative value, a column that is no indicator at its first rows)."""
    from sdc_magic.evidence.facts import group_evidence

    rng = np.random.default_rng(len(case))
    n, groups = 4_000, 37
    ids = rng.integers(0, groups, n)
    x = rng.lognormal(2, 1, n)
    if case == "rows_outside":
        ids[rng.random(n) < 0.2] = -1
    elif case == "missing_values":
        x[rng.random(n) < 0.2] = np.nan
    elif case == "negatives":
        x = x - 8
    elif case == "flag":
        x = (rng.random(n) < 0.3).astype(float)
    elif case == "coded_1_2":
        x = rng.integers(1, 3, n).astype(float)
        x[:5000] = np.where(np.arange(min(n, 5000)) % 2 == 0, 1.0, 2.0)  # (its first rows look coded too)
    unit = pd.Series(rng.integers(0, 900, n)) if case == "unit" else None
    ev = group_evidence(ids, pd.Index(range(groups)), {"x": pd.Series(x)}, unit, 2, magnitudes={"x"})
    var = ev.variables["x"]
    for g in range(groups):
        rows = (ids == g) & ~np.isnan(x)
        values = x[rows]
        if unit is not None:
            values = pd.Series(values).groupby(unit.to_numpy()[rows]).sum().to_numpy()
        assert var.units[g] == len(values)
        assert var.total[g] == pytest.approx(values.sum())
        assert var.total_abs[g] == pytest.approx(np.abs(values).sum())
        assert bool(var.negative[g]) == bool((values < 0).any())
        top = np.sort(np.abs(values))[::-1][:2]
        assert np.allclose(var.top[g][:len(top)], top)
        if case in ("flag", "coded_1_2"):
            level = 1.0 if case == "flag" else 2.0
            assert var.level == level and var.ones[g] == int((values == level).sum())
        else:
            assert var.ones is None


def test_measure_words_are_the_measure_strings_of_their_parts() -> None:
    """flatten's column-wise measure words are measure_string of each cell's parts (unnamed levels),
    whatever the parts: row numbers, several column levels, text with the separator, dates, missing."""
    from sdc_magic.evidence.flatten import canonical_labels, measure_string

    frames = [pd.DataFrame({"a": list("xyz") * 40, "n": range(120)}),
              pd.DataFrame(np.arange(12).reshape(3, 4),
                           columns=pd.MultiIndex.from_tuples([("s", 1), ("s", 2), ("t", 1), ("t", 10)])),
              pd.DataFrame({"v": [1.0, 2.0, 3.0]}, index=pd.Index([1.5, np.nan, 10.0])),
              pd.DataFrame({"v": [1, 2]}, index=pd.MultiIndex.from_tuples([("b", "a"), ("a|b", "")])),
              pd.DataFrame({"x": [1], "y": [2]}, index=[pd.Timestamp("2026-01-01")])]
    for frame in frames:
        flat = flatten(frame)
        rows = [canonical_labels(frame.index.get_level_values(i)) for i in range(frame.index.nlevels)]
        cols = [canonical_labels(frame.columns.get_level_values(i)) for i in range(frame.columns.nlevels)]
        expected = [measure_string([r[i] for r in rows] + [c[j] for c in cols])
                    for i in range(frame.shape[0]) for j in range(frame.shape[1])]
        assert list(flat.measure) == expected
