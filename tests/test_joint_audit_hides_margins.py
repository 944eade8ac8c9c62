"""The joint audit hides displayed margins when hiding inner cells cannot protect (stop 67).

Found by the random sessions of stops 65/66 (class "linked outputs leave hidden cells
recoverable", 3 tables blocked whole): two cleared tables of districts {A, C} and {B, C} by sex,
then ``pd.crosstab(df.sex, df.band, margins=True)`` of everyone. Its sex margins give C's women as
F(A, C) + F(B, C) − F (C has 3 people), whatever inner cell is hidden, and the joint audit only
hid inner cells: the table was blocked. It now hides margins too (then shows again those the
pattern does not need), the attacker's LP proving the pattern as for any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

SETUP = """
import numpy as np, pandas as pd
rng = np.random.default_rng(2)
n = 1200
df = pd.DataFrame({"district": rng.choice(["A", "B"], n), "sex": rng.choice(["F", "M"], n),
                   "band": rng.choice(["child", "adult", "older"], n)})
df = pd.concat([df, pd.DataFrame({"district": "C", "sex": ["F", "F", "M"], "band": ["child", "adult", "adult"]})],
               ignore_index=True)
"""
FIRST = ['df[df.district.isin(["A", "C"])].groupby("sex").size()',
         'df[df.district.isin(["B", "C"])].groupby("sex").size()']
CROSSTAB = "pd.crosstab(df.sex, df.band, margins=True)"
LATER = ['df.groupby("sex").size()', 'df.groupby("band").size()', 'df[df.sex == "F"].groupby("band").size()',
         'df[df.district != "C"].groupby("sex").size()']


@pytest.fixture(autouse=True)
def _fresh_linking(sdc: Any) -> None:
    # (the test shell's session outlives a test: each starts without earlier outputs)
    from sdc_magic.jupyter import kernel

    kernel.current().populations.clear()


def _published(codes: list[str]) -> list[tuple[dict[str, str], float]]:
    """Every figure the session's records publish, as (the rows it counts, its value): the rows
    by district (a set), sex and band (None: any)."""
    from sdc_magic.jupyter.kernel import session

    out: list[tuple[dict[str, Any], float]] = []
    records = session().ledger.records[-len(codes):]  # (the shell's ledger outlives a test)
    for rec, code in zip(records, codes, strict=True):
        if not rec.csv:
            continue
        lines = rec.csv.strip().splitlines()
        head = lines[0].split(",")
        districts = {"A", "C"} if "A\", \"C" in code else {"B", "C"} if "B\", \"C" in code else \
            {"A", "B"} if 'district != "C"' in code else {"A", "B", "C"}
        fixed_sex = "F" if 'sex == "F"' in code else None
        for line in lines[1:]:
            parts = line.split(",")
            for col, value in zip(head[1:], parts[1:], strict=True):
                if not value:
                    continue
                where: dict[str, Any] = {"district": districts, "sex": fixed_sex, "band": None}
                if head[0] == "sex":
                    where["sex"] = None if parts[0] == "All" else parts[0]
                    if col not in ("0", "All"):
                        where["band"] = col
                elif head[0] == "band":
                    where["band"] = parts[0]
                out.append((where, float(value)))
    return out


def _attacker_bounds(codes: list[str], district: str, sex: str) -> tuple[float, float]:
    """The attacker's LP over the counts of district × sex × band: bounds of one group's count."""
    cells = [(d, s, b) for d in "ABC" for s in "FM" for b in ("adult", "child", "older")]
    rows, rhs = [], []
    for where, value in _published(codes):
        rows.append([1.0 if d in where["district"] and where["sex"] in (None, s) and where["band"] in (None, b)
                     else 0.0 for d, s, b in cells])
        rhs.append(value)
    target = np.array([1.0 if (d, s) == (district, sex) else 0.0 for d, s, b in cells])
    lo = linprog(target, A_eq=np.array(rows), b_eq=np.array(rhs), bounds=(0, None), method="highs")
    hi = linprog(-target, A_eq=np.array(rows), b_eq=np.array(rhs), bounds=(0, None), method="highs")
    assert lo.status == 0 and hi.status in (0, 3)
    return lo.fun, (np.inf if hi.status == 3 else -hi.fun)


def test_the_crosstab_is_suppressed_with_margins_hidden_not_blocked(sdc) -> None:
    sdc.run(SETUP)
    for code in FIRST:
        assert sdc.run(code).outputs[-1][1]["sdc_magic"]["status"] == "pass"
    meta = sdc.run(CROSSTAB).outputs[-1][1]["sdc_magic"]
    assert meta["status"] == "suppressed", meta
    assert any("margin(s) hidden after a joint audit" in n for n in meta["notes"]), meta["notes"]
    for sex in "FM":  # C's 2 women and 1 man: not pinned, and not proved below the threshold
        lo, hi = _attacker_bounds([*FIRST, CROSSTAB], "C", sex)
        assert hi - lo >= 1 and hi >= 5, (sex, lo, hi)


def test_later_outputs_do_not_give_back_what_the_hidden_margins_protect(sdc) -> None:
    """The margins the display hid are recorded as hidden: the sex totals shown later would give
    C's women by the same subtraction, and are hidden in turn."""
    sdc.run(SETUP)
    for code in [*FIRST, CROSSTAB, *LATER]:
        sdc.run(code)
    for sex in "FM":
        lo, hi = _attacker_bounds([*FIRST, CROSSTAB, *LATER], "C", sex)
        assert hi - lo >= 1 and hi >= 5, (sex, lo, hi)


@pytest.mark.parametrize("selection", ['t["All"]', 't.loc["F"]', 't.loc["M"]', 't["adult"]', 't.T'])
def test_a_selection_of_the_table_hides_what_the_joint_audit_hid(sdc, selection: str) -> None:
    """helper-90 (red team of this stop): ``t["All"]`` of the crosstab was ``review`` with nothing
    hidden, showing F 614 and M 589 (C's 2 women, 1 man by the subtraction above): a selection
    inherited the table's own protection, recomputed, which knows nothing of the cells the joint
    audit hid (``Entry.displayed_hidden`` now carries the displayed decision)."""
    sdc.run(SETUP)
    for code in FIRST:
        sdc.run(code)
    assert sdc.run("t = " + CROSSTAB + "\nt").outputs[-1][1]["sdc_magic"]["status"] == "suppressed"
    ran = sdc.run(selection)
    text = ran.outputs[-1][0]["text/plain"].split("\nsdc_magic:")[0]
    numbers = {int(x) for x in text.replace("\n", " ").split() if x.isdigit()}
    assert not numbers & {614, 589, 1203, 192, 195, 196}, text


def test_a_rebuild_of_the_table_looked_up_before_its_display_hides_what_it_hid(sdc) -> None:
    """helper-91: a numpy rebuild of one of t's columns before t is shown cached t's hidden cells
    (none of its own); t's display then hid its margins, and the same rebuild of the All column
    showed F 614 and M 589 from the stale look-up."""
    sdc.run(SETUP)
    for code in FIRST:
        sdc.run(code)
    sdc.run("t = " + CROSSTAB)
    sdc.run('pd.Series(t.to_numpy()[:, 1], index=t.index, name="child")')
    assert sdc.run("t").outputs[-1][1]["sdc_magic"]["status"] == "suppressed"
    ran = sdc.run('pd.Series(t["All"].to_numpy(), index=t.index, name="All")')
    text = ran.outputs[-1][0]["text/plain"].split("\nsdc_magic:")[0]
    assert not {int(x) for x in text.split() if x.isdigit()} & {614, 589, 1203}, text


def test_a_blocked_selection_marks_only_the_cells_it_displayed(sdc) -> None:
    """helper-91 (over-protection): after ``t[["All"]]`` was blocked, every cell of t counted as
    hidden, and ``t["child"]`` — shown by t itself — was hidden whole."""
    sdc.run(SETUP)
    for code in FIRST:
        sdc.run(code)
    sdc.run("t = " + CROSSTAB)
    assert sdc.run('t[["All"]]').outputs[-1][1]["sdc_magic"]["status"] == "blocked"
    sdc.run("t")
    text = sdc.run('t["child"]').outputs[-1][0]["text/plain"].split("\nsdc_magic:")[0]
    assert "226" in text and "190" in text, text
