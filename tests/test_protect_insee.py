"""The INSEE course's worked examples ("Méthodes suppressives pour les données tabulées"), exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import audit, protect

REGIONS = ["Nord", "Ouest", "Est", "Sud"]


def polluting() -> pd.DataFrame:
    rows = [("polluting", r, v) for r, v in zip(REGIONS, [6, 14, 1, 7], strict=True)]
    rows += [("non-polluting", r, v) for r, v in zip(REGIONS, [3, 2, 3, 13], strict=True)]
    return pd.DataFrame(rows, columns=["type", "region", "n"])


def instruments() -> pd.DataFrame:
    values = {"Nord": [58, 71, 92, 800], "Centre": [11, 124, 157, 934], "Sud": [36, 24, 60, 651]}
    # contributors: from the course's first table; "Other" is not given there (many firms)
    units = {"Nord": [5, 17, 5, 40], "Centre": [4, 11, 2, 40], "Sud": [3, 6, 1, 40]}
    rows = [(reg, ins, values[reg][j], units[reg][j])
            for reg in values for j, ins in enumerate(["Harp", "Piano", "Organ", "Other"])]
    return pd.DataFrame(rows, columns=["region", "instrument", "sales", "firms"])


def intervals(df: pd.DataFrame, dims: list[str]) -> dict[tuple, tuple[float, float]]:
    return {tuple(r[d] for d in dims): (r["lower"], r["upper"]) for _, r in df.iterrows()}


def test_polluting_firms_ouest_est_mask_intervals() -> None:
    df = polluting()
    df["hide"] = df.region.isin(["Ouest", "Est"])
    got = intervals(audit(df, dims=["type", "region"], value="n", hidden="hide"), ["type", "region"])
    assert got == {
        ("polluting", "Ouest"): (11, 15),
        ("polluting", "Est"): (0, 4),
        ("non-polluting", "Ouest"): (1, 5),
        ("non-polluting", "Est"): (0, 4),
    }


def test_polluting_firms_primary_alone_is_not_enough() -> None:
    df = polluting()
    df["hide"] = ((df.type == "polluting") & (df.region == "Est")) | (
        (df.type == "non-polluting") & (df.region == "Ouest"))
    got = intervals(audit(df, dims=["type", "region"], value="n", hidden="hide"), ["type", "region"])
    assert got == {("polluting", "Est"): (1, 1), ("non-polluting", "Ouest"): (2, 2)}


def test_polluting_firms_protect_finds_the_lesson_mask_without_singletons() -> None:
    res = protect(polluting(), dims=["type", "region"], value="n", rules=Rules(threshold=3), singletons=False)
    assert res.audit_ok and res.method.startswith("optimal/")
    hidden = res.cells[(res.cells.status != "safe")]
    assert set(zip(hidden.type, hidden.region, strict=True)) == {
        ("polluting", "Ouest"), ("polluting", "Est"), ("non-polluting", "Ouest"), ("non-polluting", "Est")}
    assert res.cost == 17


def test_polluting_firms_singleton_breaks_the_lesson_mask() -> None:
    # The single polluting firm in Est knows its cell is 1: with the Ouest+Est mask it then
    # reads Est/non-polluting = 3, Ouest/polluting = 14 and Ouest/non-polluting = 2.
    res = protect(polluting(), dims=["type", "region"], value="n", rules=Rules(threshold=3))
    assert res.audit_ok
    hidden = set(zip(res.cells.type[res.hidden], res.cells.region[res.hidden], strict=True))
    assert hidden != {("polluting", "Ouest"), ("polluting", "Est"), ("non-polluting", "Ouest"),
                      ("non-polluting", "Est")}
    assert res.cost > 17


def test_instruments_mask_harp_organ_fails_and_piano_organ_passes() -> None:
    df = instruments()
    dims = ["region", "instrument"]
    df["m1"] = df.instrument.isin(["Harp", "Organ"])
    df["m2"] = df.instrument.isin(["Piano", "Organ"])
    m1 = intervals(audit(df, dims=dims, value="sales", hidden="m1"), dims)
    assert m1 == {("Nord", "Harp"): (0, 105), ("Nord", "Organ"): (45, 150), ("Centre", "Harp"): (0, 105),
                  ("Centre", "Organ"): (63, 168), ("Sud", "Harp"): (0, 96), ("Sud", "Organ"): (0, 96)}
    assert m1[("Centre", "Organ")][1] < 157 * 1.1  # 168 < 172.7: not protected at 10 %
    m2 = intervals(audit(df, dims=dims, value="sales", hidden="m2"), dims)
    assert m2 == {("Nord", "Piano"): (0, 163), ("Nord", "Organ"): (0, 163), ("Centre", "Piano"): (0, 219),
                  ("Centre", "Organ"): (62, 281), ("Sud", "Piano"): (0, 84), ("Sud", "Organ"): (0, 84)}
    lo, hi = m2[("Centre", "Organ")]
    assert lo <= 157 * 0.9 and hi >= 157 * 1.1


def _secondaries(res) -> set[tuple[str, str]]:
    sec = res.cells[res.cells.status == "secondary"]
    return set(zip(sec.region, sec.instrument, strict=True))


@pytest.mark.parametrize("solver", ["HiGHS", "CBC"])
def test_instruments_optimum_without_singletons(solver: str) -> None:
    res = protect(instruments(), dims=["region", "instrument"], value="sales", units="firms",
                  rules=Rules(threshold=3), singletons=False, method="optimal", solver=solver,
                  time_limit=120)  # generous: a loaded machine must not turn optimality into a timeout
    assert res.audit_ok and res.method == f"optimal/{solver}"
    prim = res.cells[res.cells.status == "primary"]
    assert set(zip(prim.region, prim.instrument, strict=True)) == {("Centre", "Organ"), ("Sud", "Organ")}
    assert _secondaries(res) == {("Centre", "Piano"), ("Sud", "Piano")}
    assert res.cost == 148


def test_instruments_optimum_with_singletons() -> None:
    res = protect(instruments(), dims=["region", "instrument"], value="sales", units="firms",
                  rules=Rules(threshold=3))
    assert res.audit_ok and res.method.startswith("optimal/")
    assert _secondaries(res) == {("Nord", "Piano"), ("Centre", "Piano"), ("Sud", "Piano"), ("Nord", "Organ")}
    assert res.cost == 311
    c = res.cells.set_index(["region", "instrument"])
    lo, hi = c.loc[("Centre", "Organ"), ["lower", "upper"]]
    assert (lo, hi) == (62, 281)


def test_instruments_148_pattern_gives_centre_organ_away_to_the_sud_organ_firm() -> None:
    # why the singleton-safe optimum differs: fix Sud/Organ = 60 (its only firm knows it)
    df = instruments()
    dims = ["region", "instrument"]
    df["h"] = df.region.isin(["Centre", "Sud"]) & df.instrument.isin(["Piano", "Organ"])
    out = intervals(audit(df, dims=dims, value="sales", hidden="h"), dims)
    assert out[("Centre", "Organ")] == (133, 217)  # outsider: protected
    df.loc[(df.region == "Sud") & (df.instrument == "Organ"), "h"] = False  # insider view
    out = intervals(audit(df, dims=dims, value="sales", hidden="h"), dims)
    assert out[("Centre", "Organ")] == (157, 157)


def test_protection_interval_is_reported_for_every_primary() -> None:
    res = protect(instruments(), dims=["region", "instrument"], value="sales", units="firms",
                  rules=Rules(threshold=3))
    req = res.requirements.set_index(["region", "instrument", "direction"])
    assert np.isclose(req.loc[("Centre", "Organ", "up"), "must_reach"], 172.7)
    assert np.isclose(req.loc[("Centre", "Organ", "down"), "must_reach"], 141.3)
    assert np.isclose(req.loc[("Sud", "Organ", "up"), "must_reach"], 66.0)
