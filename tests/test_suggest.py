"""Better answers: coarser groupings, merges, cut points, rates — each checked before it is offered."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sdc_magic.datasets import make_referrals
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.suggest import Suggester, _ordered_labels, fold_smallest, merge_adjacent

FOUR_WAY = ["admin2", "case_category", "age_band", "sex"]


@pytest.fixture(scope="module")
def referrals() -> pd.DataFrame:
    df = make_referrals()
    return df.assign(completed=df["consent_to_refer"] & df["referral_accepted"] & df["days_to_first_service"].notna())


def _four_way_suggestions(session: Session, referrals: pd.DataFrame):
    table = referrals.groupby(FOUR_WAY).size()
    checked = session.check(table)
    found, _ = session.suggestions(checked, name_of=lambda frame, keys: "referrals", candidates=1000)
    return checked, found


def test_four_way_table_suggests_area_by_category_with_nothing_hidden(session, referrals) -> None:
    checked, found = _four_way_suggestions(session, referrals)
    assert checked.hidden_count >= 85
    by_title = {s.title.split(" (")[0]: s for s in found.items}
    area = by_title["admin2 × case_category"]
    assert area.hidden == 0 and area.cells == 28 and area.checked.status == "pass"
    assert area.code == "referrals.groupby(['admin2', 'case_category'], observed=True).size().unstack()"
    # the code really produces that table
    produced = eval(area.code, {"referrals": referrals})
    assert int(produced.to_numpy().sum()) == 1850 and produced.shape == (7, 4)
    # no offered grouping is coarser than another offered clean grouping
    drops = [set(s.title.split(" (")[0].split(" × ")) for s in found.items if s.kind == "drop"]
    assert all(not (a < b) for a in drops for b in drops)


def test_four_way_table_suggests_the_disability_completion_rate(session, referrals) -> None:
    _, found = _four_way_suggestions(session, referrals)
    rate = next(s for s in found.items if s.title == "rate of completed among consent_to_refer by disability_reported")
    assert "26.7 % of 202" in rate.detail and "46.2 % of 1,436" in rate.detail
    table = eval(rate.code, {"referrals": referrals})
    assert table.loc[True, "sum"] == 54 and table.loc[True, "count"] == 202
    assert table.loc[False, "sum"] == 663 and table.loc[False, "count"] == 1436
    assert "What decision does this feed?" in found.answer
    assert found.answer.count("\n- ") == 3


def test_insee_age_bands_merge_the_youngest(session) -> None:
    rows = []
    for status, counts in (("polluting", [2, 5, 7, 6]), ("non-polluting", [8, 15, 17, 20])):
        for band, n in zip(["<25", "25-30", "30-50", ">50"], counts, strict=True):
            rows += [(status, band)] * n
    firms = pd.DataFrame(rows, columns=["status", "manager_age"])
    session.set_rules(threshold=3)
    table = firms.groupby(["status", "manager_age"]).size().unstack()
    checked = session.check(table)
    assert checked.status == "suppressed" and checked.primary_count == 1
    found, _ = session.suggestions(checked, name_of=lambda f, k: "firms", candidates=1000)
    merge = next(s for s in found.items if s.kind == "merge")
    assert merge.recoding == {"<30": ["<25", "25-30"], "30-50": ["30-50"], ">50": [">50"]}
    merged = eval(merge.code.split("\n")[0].split(" = ", 1)[1], {"firms": firms, "pd": pd})
    counts = merged.groupby(["status", "manager_age"]).size()
    assert counts.min() >= 3 and counts[("polluting", "<30")] == 7
    # the merged table, published after the protected original, reveals none of its hidden cells
    session.populations.clear()
    first = session.publish(table)
    second = session.publish(merged.groupby(["status", "manager_age"]).size().unstack())
    assert first.metadata["sdc_magic"]["status"] == "suppressed"
    assert second.metadata["sdc_magic"]["status"] == "pass"
    assert len(session.populations) == 2  # linked, and the joint audit hid nothing more
    assert not any("joint audit" in n for n in second.metadata["sdc_magic"]["notes"])


def test_new_cut_points_from_the_numeric_source(session, referrals) -> None:
    table = referrals.groupby(["admin2", "age_band"]).size()
    suggester = Suggester(referrals, ["admin2", "age_band"], None, "size", session.rules.replace(threshold=15),
                          session.check, name="referrals", capturing=session.capturing)
    cut = suggester._cut("age_band")
    assert cut is not None and cut.kind == "cut" and "pd.cut(referrals['age']" in cut.code
    assert cut.hidden == 0
    del table


def test_merge_adjacent_is_optimal_on_a_small_case() -> None:
    from sdc_magic.config import preset

    rules = preset("insee")  # threshold 3
    counts = np.array([[2, 8], [5, 15], [7, 17], [6, 20]], dtype=float)
    assert merge_adjacent(counts, rules) == [[0, 1], [2], [3]]
    assert merge_adjacent(np.array([[1.0], [1.0]]), rules) is None
    assert fold_smallest(np.array([[1.0], [1.0], [10.0], [9.0]]), [0, 1, 2, 3], rules) == [0, 1, 3]


def test_band_labels_are_ordered() -> None:
    assert _ordered_labels(["12-17", "60+", "0-11", "18-59"]) == ["0-11", "12-17", "18-59", "60+"]
    assert _ordered_labels(["30-50", ">50", "<25", "25-30"]) == ["<25", "25-30", "30-50", ">50"]
    assert _ordered_labels(["GBV", "Psychosocial"]) is None
    ordered = pd.CategoricalDtype(["low", "high"], ordered=True)
    assert _ordered_labels(["high", "low"], ordered) == ["low", "high"]


def test_widget_state_holds_only_protected_content(session, referrals) -> None:
    ipywidgets = pytest.importorskip("ipywidgets")
    from sdc_magic.outputs.render import HIDDEN, render_html
    from sdc_magic.outputs.widget import build

    table = referrals.groupby(["admin2", "sex", "age_band"]).size().unstack()
    checked = session.check(table)
    found, _ = session.suggestions(checked, name_of=lambda f, k: "referrals", candidates=1000)
    widget = build(checked, "out-1", found, on_use=lambda code: None, on_exception=lambda reason: None)
    states = []

    def walk(w: object) -> None:
        if isinstance(w, ipywidgets.Widget):
            states.append(json.dumps(w.get_state(), default=str))
            for child in getattr(w, "children", ()):
                walk(child)

    walk(widget)
    values = [json.loads(st).get("value") for st in states]
    page = render_html(checked)
    assert page in values  # the widget shows exactly the protected rendering
    from _nbutil import parse_html_table

    grid = np.array(parse_html_table(page).rows, dtype=object)
    assert grid.shape == table.shape
    assert ((grid == HIDDEN) == checked.hidden).all()
    shown = ~checked.hidden & ~np.isnan(table.to_numpy(dtype=float))
    assert (grid[shown].astype(float) == table.to_numpy(dtype=float)[shown]).all()
    # reasons never state a hidden count ("3 records"); they say "fewer than 5 records"
    from sdc_magic.outputs.widget import reasons_html

    why = reasons_html(checked)
    assert why in values and "fewer than 5 records" in why
    import re

    assert not re.findall(r"(?<!fewer than )\b\d+ records", why)


def test_cut_points_are_few_and_round() -> None:
    """Single years of age pass one by one; an analyst wants a few round bands instead."""
    from sdc_magic.datasets import make_referrals
    from sdc_magic.jupyter.session import Session

    sess = Session()
    referrals = make_referrals()
    with sess.capturing():
        table = referrals.groupby(["sex", "age_band"]).size().unstack()
    checked = sess.check(table)
    from sdc_magic.outputs.suggest import Suggester

    finder = Suggester(checked.entry.source.frame, list(checked.entry.source.keys), None, "size", sess.rules,
                    sess.check, name="referrals", capturing=sess.capturing)
    cut = finder._cut("age_band")
    assert cut is not None
    bands = referrals["age_band"].nunique()
    labels = cut.recoding.keys()
    assert 2 <= len(labels) <= bands
    edges = [float(x) for x in cut.title.split(": ")[1].split(", ")]
    assert all(e % 5 == 0 for e in edges), edges
    assert cut.hidden == 0


def test_rates_are_about_the_table_and_the_request_is_in_words(session, referrals) -> None:
    """Issue 24.3: no plain attribute grouped by a flag the table is not about (the same
    "disability by completed" for every count table); the reply names the request in words."""
    _, found = _four_way_suggestions(session, referrals)
    rates = [s for s in found.items if s.kind == "rate"]
    table_keys = {"admin2", "case_category", "age_band", "sex"}
    for rate in rates:
        group = rate.title.rsplit(" by ", 1)[1]
        assert group in table_keys or " among " in rate.title, rate.title
    assert "rate of disability_reported by completed" not in [s.title for s in found.items]
    assert found.answer.startswith("**Request:** counts by admin2 × case_category × age_band × sex")
    assert "groupby" not in found.answer.split("\n", 1)[0]
