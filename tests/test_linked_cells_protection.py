"""A cell hidden only because an earlier output hid the same people ("linked") is hidden, but asks
for no protection interval of its own and no single contributor attacks it (``protect(linked=...)``),
when it shows a kind of figure no earlier output over these people told (``rules.LinkedReason``):
a flag's sums after counts. A linked cell of a kind told before (the same income's sums, any count
after counts) keeps a primary's level against every attacker (red team of this change, helper-53:
B's income sum, read exactly by the one person of another cell, gave C = (B + C) − B).

Why (red team, stop 50): the district counts (A 40, B and C hidden), then the flag's sum and count
by district hid A's flag sum (17) "so that the other hidden cells cannot be recovered", and the
flag's sum and mean by district was blocked whole. B's flag sum, hidden only because the counts hid
B, was asked for 10 % of its value and attacked by C's one flagged person (who knows C's flag sum:
B = total - 17 - 1), so A had to go; nothing of A's figures tells anything hidden. Alone, or after
the counts by sex, the same tables show A's 17 and 0.425.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_engines_redteam import PEOPLE

from sdc_magic.config import Rules, preset
from sdc_magic.datasets import make_referrals
from sdc_magic.jupyter.session import Session
from sdc_magic.protect import protect

X = "✕"


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _body(out) -> str:
    return out.data["text/plain"].split("sdc_magic:")[0]


def _row(out, label: str) -> list[str]:
    for line in _body(out).splitlines():
        words = line.split()
        if words and words[0] == label:
            return words[1:]
    raise AssertionError(f"no row {label!r} in\n{_body(out)}")


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def test_a_flags_sums_after_the_district_counts_show_district_a(sess: Session) -> None:
    df = PEOPLE.copy()
    counts = sess.publish(df.groupby("district").size())
    assert _row(counts, "A") == ["40"] and _row(counts, "B") == [X] and _row(counts, "C") == [X]
    sums = sess.publish(df.groupby("district").flag.agg(["sum", "count"]))
    assert _status(sums) == "suppressed"
    assert _row(sums, "A") == ["17", "40"]
    assert _row(sums, "B") == [X, X] and _row(sums, "C") == [X, X]  # (B linked, C small)
    means = sess.publish(df.groupby("district").flag.agg(["sum", "mean"]))
    assert _status(means) == "suppressed"
    assert _row(means, "A") == ["17", "0.425"]
    assert _row(means, "B") == [X, X] and _row(means, "C") == [X, X]


def test_the_same_flag_table_after_the_counts_as_alone() -> None:
    """The figures a fresh session shows are the figures shown after the counts."""
    df = PEOPLE.copy()
    alone = Session(rules=preset("humanitarian"))
    alone.capture.install()
    try:
        first = _body(alone.publish(df.groupby("district").flag.agg(["sum", "mean"])))
    finally:
        alone.capture.uninstall()
    after = Session(rules=preset("humanitarian"))
    after.capture.install()
    try:
        after.publish(df.groupby("district").size())
        second = _body(after.publish(df.groupby("district").flag.agg(["sum", "mean"])))
    finally:
        after.capture.uninstall()
    assert first == second


def test_referrals_flags_after_the_counts_hide_no_published_district(sess: Session) -> None:
    """The same class on the synthetic referrals (two small districts): 4 cells hidden in each
    flag table, as before stop 50 (then 6 and 6: Gonaives, whose count table 1 published, was
    hidden in table 2 and Saint-Marc in table 3)."""
    r = make_referrals()
    r2 = r[(r.admin2 != "Mirebalais") | (r.index % 20 == 0)]
    outs = [sess.publish(r2.groupby("admin2").size()),
            sess.publish(r2.groupby("admin2").referral_accepted.agg(["sum", "count"])),
            sess.publish(r2.groupby("admin2").disability_reported.agg(["sum", "mean"]))]
    assert [_body(o).count(X) for o in outs] == [2, 4, 4]
    assert all(_status(o) == "suppressed" for o in outs)


def _cells(values: dict[str, float], linked: set[str], primary: set[str] = frozenset()) -> pd.DataFrame:
    return pd.DataFrame({"d": list(values), "value": list(values.values()),
                         "primary": [k in primary for k in values], "linked": [k in linked for k in values]})


def test_a_linked_cell_is_never_recovered_exactly() -> None:
    """Alone in a one-dimensional table with a known total, a linked cell would be the total minus
    the others: another cell is hidden, and the linked cell keeps the minimal width (1 for counts)."""
    cells = _cells({"A": 40, "B": 30, "C": 12, "D": 25}, linked={"B"})
    got = protect(cells, dims=["d"], value="value", primary="primary", linked="linked", rules=Rules())
    out = got.cells[got.cells["d"] != "Total"].set_index("d")
    assert got.audit_ok
    assert out.loc["B", "status"] == "primary" and out.loc["B", "reasons"] == ["linked"]
    assert (out["status"] == "secondary").sum() == 1
    assert out.loc["B", "upper"] - out.loc["B", "lower"] >= 1
    # the cheapest other cell goes (cost = value): C
    assert out.loc["C", "status"] == "secondary"


def test_a_linked_cell_asks_for_the_minimal_width_only() -> None:
    """A primary count of 1 beside a linked 13 and a published 17: the linked cell moves by the
    small cell's room (1), short of 10 % of 13; no third cell is hidden for it."""
    cells = _cells({"A": 17, "B": 13, "C": 1}, linked={"B"}, primary={"C"})
    got = protect(cells, dims=["d"], value="value", primary="primary", linked="linked", rules=Rules())
    out = got.cells[got.cells["d"] != "Total"].set_index("d")
    assert got.audit_ok and out.loc["A", "status"] == "safe"
    # the same cell flagged primary (a level of its own, 10 %) hides A as well
    flagged = _cells({"A": 17, "B": 13, "C": 1}, linked=set(), primary={"B", "C"})
    as_primary = protect(flagged, dims=["d"], value="value", primary="primary", rules=Rules())
    assert as_primary.cells.set_index("d").loc["A", "status"] == "secondary"


def test_a_linked_cell_that_fails_a_rule_keeps_its_level() -> None:
    """A cell both small and linked is a primary like any other (its threshold reach stays)."""
    cells = _cells({"A": 40, "B": 30, "C": 3, "D": 25}, linked={"C"})
    got = protect(cells, dims=["d"], value="value", primary="primary", linked="linked", rules=Rules(threshold=5))
    out = got.cells[got.cells["d"] != "Total"].set_index("d")
    assert "threshold" in out.loc["C", "reasons"] and "linked" not in out.loc["C", "reasons"]
    assert out.loc["C", "upper"] >= 5


def test_linked_cells_need_a_protection_function_that_takes_them(sess: Session) -> None:
    """A protection function of the analyst's own without ``linked=`` gets them as primaries."""
    seen: list[set[str]] = []

    def mine(cells: pd.DataFrame, *, dims, value, units, top, rules, primary, margins, progress=None,
             publish=None):
        seen.append(set(cells.columns))
        return protect(cells, dims=dims, value=value, units=units, top=top, rules=rules, primary=primary,
                       margins=margins, publish=publish)

    s = Session(rules=preset("humanitarian"))
    s.protector = mine
    s.capture.install()
    try:
        df = PEOPLE.copy()
        s.publish(df.groupby("district").size())
        out = s.publish(df.groupby("district").flag.agg(["sum", "count"]))
    finally:
        s.capture.uninstall()
    assert seen and all("linked" not in cols for cols in seen)
    assert _row(out, "B") == [X, X] and _row(out, "C") == [X, X]
    assert _status(out) in ("suppressed", "review", "blocked")


def _value(out, label: str) -> float | None:
    cell = _row(out, label)[0]
    return None if cell == X else float(cell)


def test_an_income_sum_linked_to_an_earlier_income_sum_keeps_its_level(sess: Session) -> None:
    """Income by sex (T), income by district (A shown, B and C hidden), then income by a grouping
    with person 6 (102) alone, B, and A with C together: person 6 knows his 13.15, so B = T − A/C −
    13.15 and C = T − A − B (C's three people's income) unless the third table hides more."""
    df = PEOPLE.copy()
    d = df.copy()
    d["grp"] = np.where(d.age >= 102, "102+", np.where(d.district == "B", "B", "A/C"))
    by_sex = sess.publish(d.groupby("sex").income.sum())
    by_district = sess.publish(d.groupby("district").income.sum())
    by_grp = sess.publish(d.groupby("grp").income.sum())
    total = _value(by_sex, "F") + _value(by_sex, "M")
    a, ac = _value(by_district, "A"), _value(by_grp, "A/C")
    true_c = round(float(df.income[df.district == "C"].sum()), 2)
    if a is not None and ac is not None and _status(by_grp) in ("pass", "suppressed"):
        b = total - ac - float(df.income[6])
        assert abs((total - a - b) - true_c) > 0.5


def test_a_flag_sum_linked_to_an_earlier_flag_sum_keeps_its_level(sess: Session) -> None:
    """The same with the flag: the 100+ band's one flagged person reads B, then C's flagged count."""
    df = PEOPLE.copy()
    d = df.copy()
    d["grp"] = np.where(d.age > 100, "100+", np.where(d.district == "B", "B", "A/C"))
    by_sex = sess.publish(d.groupby("sex").flag.sum())
    by_district = sess.publish(d.groupby("district").flag.sum())
    by_grp = sess.publish(d.groupby("grp").flag.sum())
    total = _value(by_sex, "F") + _value(by_sex, "M")
    a, ac = _value(by_district, "A"), _value(by_grp, "A/C")
    if a is not None and ac is not None and _status(by_grp) in ("pass", "suppressed"):
        b = total - ac - 1
        assert total - a - b != int(df.flag[df.district == "C"].sum())


def test_a_flag_sum_keeps_its_level_when_a_flag_figure_was_told_before(sess: Session) -> None:
    """The flag's sums by sex first: a flag figure was told over these people, so the flag's sum of
    B, linked by the district counts, keeps a primary's level against C's one flagged person (who
    would read B = 31 − 17 − 1 and, with B's flag mean from anywhere, B's count), and A's 17 goes
    with it; without that first table (test above) A's 17 is shown."""
    df = PEOPLE.copy()
    sess.publish(df.groupby("sex").flag.sum())
    sess.publish(df.groupby("district").size())
    sums = sess.publish(df.groupby("district").flag.agg(["sum", "count"]))
    linked = [r for r in sums.checked.reasons.get((1, 0), []) if r.rule == "linked"]
    assert linked and all(r.told_kind("sum", "flag") for r in linked)
    assert _row(sums, "A")[0] == X
