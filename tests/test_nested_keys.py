"""Keys that nest (district within region) are protected as one dimension with a hierarchy.

The two models are one system of equations (``checking/nested_keys.py``): the tests check the
plan (what is collapsed and what is left), the round trip of the cells, and that the exact
intervals of the folded model are those of the full model of the nested keys, cell for cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from table_fixtures import red_team_people

from sdc_magic.checking import nested_keys
from sdc_magic.checking.check import _call_protect
from sdc_magic.config import Rules
from sdc_magic.protect import audit, protect

REGION = {"D0": "R1", "D1": "R1", "D2": "R1", "D3": "R2", "D4": "R2", "D5": "R3", "D6": "R3"}
PROVINCE = {"R1": "P1", "R2": "P1", "R3": "P2"}


def _cells(seed: int, *, province: bool = False, rare: float = 0.3) -> tuple[pd.DataFrame, list[str]]:
    """Counts by district × region (× province) × sex, some small (primaries below 5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d, r in REGION.items():
        for s in ("F", "M"):
            n = int(rng.integers(1, 5)) if rng.random() < rare else int(rng.integers(5, 60))
            row = {"_dim0": d, "_dim1": r, "_dim2": s, "value": float(n), "units": float(n)}
            if province:
                row["_dim3"] = PROVINCE[r]
            rows.append(row)
    cells = pd.DataFrame(rows)
    cells["primary"] = cells["value"] < 5
    dims = ["_dim0", "_dim1", "_dim2"] + (["_dim3"] if province else [])
    return cells, dims


def test_plan_finds_the_finest_key_and_its_chain() -> None:
    cells, dims = _cells(0, province=True)
    plan = nested_keys.plan(cells, dims)
    assert plan is not None
    assert (plan.child, plan.parents) == ("_dim0", ["_dim1", "_dim3"])
    assert plan.hierarchy() == {"R1": ["D0", "D1", "D2"], "R2": ["D3", "D4"], "R3": ["D5", "D6"],
                                "P1": ["R1", "R2"], "P2": ["R3"]}


def test_crossed_keys_are_left_alone() -> None:
    cells, dims = _cells(1)
    cells.loc[0, "_dim1"] = "R2"  # D0 now in two regions
    assert nested_keys.plan(cells, dims) is None


@pytest.mark.parametrize("edit", ["shared label", "missing label", "two groupings", "stray margin", "unequal copy"])
def test_what_does_not_nest_exactly_keeps_the_model(edit: str) -> None:
    cells, dims = _cells(2, province=True)
    if edit == "shared label":
        cells.loc[cells["_dim1"] == "R3", "_dim1"] = "D1"  # a region called like a district
    elif edit == "missing label":
        cells.loc[0, "_dim2"] = None
    elif edit == "two groupings":
        cells["_dim3"] = np.where(cells["_dim0"].isin(["D0", "D3", "D5"]), "P1", "P2")  # not by region
    elif edit == "stray margin":  # a margin row of a region under another province
        cells.loc[len(cells)] = {"_dim0": "Total", "_dim1": "R3", "_dim2": "F", "_dim3": "P1", "value": 1.0,
                                 "units": 1.0, "primary": True}
    else:  # a margin row copying D0 with another value
        row = cells.iloc[0].to_dict() | {"_dim1": "Total", "value": cells.iloc[0]["value"] + 1}
        cells.loc[len(cells)] = row
    plan = nested_keys.plan(cells, dims)
    assert plan is None or nested_keys.collapse(cells, dims, plan) is None


def test_a_constant_key_and_a_one_to_one_recode_are_levels_too() -> None:
    cells, dims = _cells(3)
    cells["_dim3"] = "all"  # one label everywhere: the total under another name
    cells["_dim4"] = cells["_dim0"].map(lambda d: "district " + d)  # a name beside the code
    plan = nested_keys.plan(cells, [*dims, "_dim3", "_dim4"])
    assert plan is not None
    assert plan.child in ("_dim0", "_dim4") and len(plan.parents) == 3


def test_collapse_then_expand_gives_every_copy_of_each_cell() -> None:
    cells, dims = _cells(4, province=True)
    plan = nested_keys.plan(cells, dims)
    folded, kept = nested_keys.collapse(cells, dims, plan)
    assert kept == ["_dim0", "_dim2"] and len(folded) == len(cells)
    back = nested_keys.expand(folded.assign(status="safe"), plan, dims)
    assert list(back.columns[:4]) == dims
    # each inner cell comes back under its region and province and under their totals: 4 copies
    assert len(back) == 4 * len(cells)
    inner = back[(back[dims] != "Total").all(axis=1)].sort_values(dims).reset_index(drop=True)
    want = cells.sort_values(dims).reset_index(drop=True)[[*dims, "value"]]
    pd.testing.assert_frame_equal(inner[[*dims, "value"]], want, check_dtype=False)


def _sums(cells: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The same cells as turnover sums of their units, with the two largest contributions."""
    rng = np.random.default_rng(100 + seed)
    out = cells.copy()
    top1 = rng.lognormal(4, 1, len(out)).round(1)
    rest = np.where(out["units"] > 1, rng.lognormal(3, 1, len(out)).round(1), 0.0)
    out["top1"] = top1
    out["top2"] = np.where(out["units"] > 1, np.minimum(rest, top1), 0.0)
    out["value"] = top1 + rest
    out["primary"] = (out["units"] < 3) | (out["top1"] > 0.85 * out["value"])
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("province", [False, True])
@pytest.mark.parametrize("statistic", ["counts", "sums"])
def test_the_folded_patterns_intervals_are_those_of_the_full_model(seed: int, province: bool, statistic: str) -> None:
    """The pattern found on the folded model, written back onto every copy, gives on the full
    model of the nested keys (every margin of every key known unless hidden) the same exact
    interval for every hidden cell: the two models are one system of equations."""
    cells, dims = _cells(seed, province=province)
    if statistic == "counts":
        rules = Rules(threshold=5, protection=10.0)
        result = _call_protect(protect, cells, dims, None, rules, {}, frequency=True)
    else:
        rules = Rules(threshold=3, dominance=(1, 85.0), protection=10.0)
        result = _call_protect(protect, _sums(cells, seed), dims, ["top1", "top2"], rules, {})
    assert result.audit_ok, result.message
    assert "Total" in set(result.cells["_dim1"]), "the margins of the coarser key are written back"
    out = result.cells
    hidden = out["status"].isin(["primary", "secondary"]).to_numpy()
    assert hidden.any()
    full = audit(out, dims=dims, value="value", hidden=hidden)
    mine = out[hidden].set_index(dims)[["lower", "upper"]]
    theirs = full.set_index(dims)[["lower", "upper"]].loc[mine.index]
    np.testing.assert_allclose(mine.to_numpy(float), theirs.to_numpy(float), rtol=1e-9, atol=1e-9)
    # every primary keeps some protection on the full model
    prim = out[(out["status"] == "primary")].set_index(dims).index
    width = (theirs.loc[prim, "upper"] - theirs.loc[prim, "lower"]).to_numpy()
    assert (width > 0).all()


def test_the_red_teams_five_key_table_is_folded(sdc, monkeypatch: pytest.MonkeyPatch) -> None:
    """``groupby([... 'district', ..., 'region'])``: the region is a level of the districts."""
    plans = []
    real = nested_keys.plan

    def spy(cells, dims):
        got = real(cells, dims)
        plans.append(got)
        return got

    monkeypatch.setattr(nested_keys, "plan", spy)
    sdc.ns["df"] = red_team_people(21)
    meta = sdc.run("df[df.age != 43].groupby(['district', 'edu', 'sex', 'band', 'region'])['income'].sum()").meta
    assert meta["status"] == "suppressed", meta.get("notes")
    assert any(p is not None and len(p.parents) == 1 for p in plans)


def test_unhashable_labels_keep_the_model() -> None:
    cells, dims = _cells(5)
    cells["_dim1"] = [[r] for r in cells["_dim1"]]  # a region label that is a list
    assert nested_keys.plan(cells, dims) is None


def test_a_protector_returning_another_kind_of_result_gets_its_cells_written_back() -> None:
    """``check`` takes the caller's protector: its result need not be the engine's dataclass."""
    cells, dims = _cells(6)

    class Result:
        def __init__(self, cells: pd.DataFrame) -> None:
            self.cells = cells

    def fake(folded: pd.DataFrame, **kwargs) -> Result:
        assert kwargs["dims"] == ["_dim0", "_dim2"] and "_dim0" in kwargs["hierarchies"]
        return Result(folded.assign(status="safe"))

    out = _call_protect(fake, cells, dims, None, Rules(), {}, frequency=True)
    assert isinstance(out, Result) and list(out.cells.columns[:3]) == dims and len(out.cells) == 2 * len(cells)
