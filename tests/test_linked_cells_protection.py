"""A cell hidden only because an earlier output hid the same people ("linked") is hidden, but asks
for no protection interval of its own and no single contributor attacks it (``protect(linked=...)``).

Why (red team, stop 50): the district counts (A 40, B and C hidden), then the flag's sum and count
by district hid A's flag sum (17) "so that the other hidden cells cannot be recovered", and the
flag's sum and mean by district was blocked whole. B's flag sum, hidden only because the counts hid
B, was asked for 10 % of its value and attacked by C's one flagged person (who knows C's flag sum:
B = total - 17 - 1), so A had to go; nothing of A's figures tells anything hidden. Alone, or after
the counts by sex, the same tables show A's 17 and 0.425.
"""

from __future__ import annotations

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
