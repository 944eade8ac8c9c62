"""Primary rules on hand-computed cases (INSEE course, lesson, SACRO semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from sdc_magic.config import preset
from sdc_magic.rules import CellFacts, assess, stat_kind


def _counts(values: list[int]) -> CellFacts:
    return CellFacts(stat=np.array(["count"] * len(values), dtype=object), units=np.array(values, dtype=float))


def test_insee_polluting_firms_frequency_rule_n3() -> None:
    # rows polluting / non-polluting, columns Nord Ouest Est Sud, then the totals
    labels = ["P/Nord", "P/Ouest", "P/Est", "P/Sud", "N/Nord", "N/Ouest", "N/Est", "N/Sud",
              "P/Total", "N/Total", "T/Nord", "T/Ouest", "T/Est", "T/Sud", "T/Total"]
    values = [6, 14, 1, 7, 3, 2, 1, 13, 28, 19, 9, 16, 2, 20, 47]
    result = assess(_counts(values), preset("insee"))
    flagged = {labels[i] for i in np.flatnonzero(result.primary)}
    assert flagged == {"P/Est", "N/Ouest", "N/Est", "T/Est"}
    assert all(r.rule == "threshold" for i in np.flatnonzero(result.primary) for r in result.reasons[i])


def _instrument_facts() -> tuple[list[str], CellFacts]:
    # contributions per firm (million EUR), chosen to give the slide's totals and counts
    cells = {
        "Nord/Harps": [20, 15, 10, 8, 5], "Nord/Pianos": [10] * 6 + [1] * 11, "Nord/Organs": [30, 25, 20, 10, 7],
        "Centre/Harps": [4, 3, 2, 2], "Centre/Pianos": [20, 15] + [10] * 8 + [9], "Centre/Organs": [150, 7],
        "Sud/Harps": [14, 12, 10], "Sud/Pianos": [6, 5, 4, 4, 3, 2], "Sud/Organs": [60],
    }
    labels = list(cells)
    k = 2
    top = np.full((len(cells), k), np.nan)
    for i, contributions in enumerate(cells.values()):
        ordered = sorted(contributions, reverse=True)[:k]
        top[i, : len(ordered)] = ordered
    facts = CellFacts(
        stat=np.array(["sum"] * len(cells), dtype=object),
        units=np.array([len(c) for c in cells.values()], dtype=float),
        total=np.array([sum(c) for c in cells.values()], dtype=float),
        top=top,
    )
    return labels, facts


def test_instrument_totals_match_the_slides() -> None:
    labels, facts = _instrument_facts()
    totals = dict(zip(labels, facts.total, strict=True))
    assert totals["Nord/Harps"] == 58 and totals["Nord/Pianos"] == 71 and totals["Nord/Organs"] == 92
    assert totals["Centre/Harps"] == 11 and totals["Centre/Pianos"] == 124 and totals["Centre/Organs"] == 157
    assert totals["Sud/Harps"] == 36 and totals["Sud/Pianos"] == 24 and totals["Sud/Organs"] == 60


@pytest.mark.parametrize("rules_kwargs,rule", [
    ({"threshold": 3}, "threshold"),
    ({"threshold": 1, "dominance": (1, 85.0)}, "dominance"),
    ({"threshold": 1, "p": 10.0}, "p_percent"),
])
def test_instruments_centre_and_sud_organs_primary_by_each_rule(rules_kwargs: dict, rule: str) -> None:
    labels, facts = _instrument_facts()
    rules = preset("humanitarian").replace(**rules_kwargs)
    result = assess(facts, rules)
    flagged = {labels[i] for i in np.flatnonzero(result.primary)}
    assert flagged == {"Centre/Organs", "Sud/Organs"}
    for i in np.flatnonzero(result.primary):
        assert rule in {r.rule for r in result.reasons[i]}


def test_dominance_threshold_is_strict_and_on_absolute_values() -> None:
    rules = preset("humanitarian").replace(threshold=1, dominance=(1, 85.0))
    facts = CellFacts(stat=np.array(["sum", "sum", "sum"], dtype=object), units=np.array([2, 2, 3.0]),
                      total=np.array([100.0, 100.0, -10.0]), top=np.array([[85, 15], [86, 14], [20, 5]], float),
                      negative=np.array([False, False, True]), total_abs=np.array([100.0, 100.0, 40.0]))
    result = assess(facts, rules)
    assert result.primary.tolist() == [False, True, False]  # 85 % is allowed, 86 % is not; 20/40 = 50 %
    assert result.review.tolist() == [False, False, True]
    assert [r.rule for r in result.reasons[2]] == ["negative"]


def test_p_percent_rule_formula() -> None:
    rules = preset("humanitarian").replace(threshold=1, p=10.0)
    # x1 = 100, x2 = 50: remainder 9 < 10 -> primary; remainder 10 -> safe
    facts = CellFacts(stat=np.array(["sum", "sum"], dtype=object), units=np.array([3, 3.0]),
                      total=np.array([159.0, 160.0]), top=np.array([[100, 50], [100, 50]], float))
    assert assess(facts, rules).primary.tolist() == [True, False]


def test_statistic_families() -> None:
    assert stat_kind("size") == "count" and stat_kind("proportion") == "count"
    assert stat_kind("mean") == "magnitude" and stat_kind("median") == "position"
    assert stat_kind("max") == "extreme" and stat_kind("std") == "spread" and stat_kind("lambda") == "custom"


def test_extremes_dof_zeros_and_custom() -> None:
    rules = preset("sacro")  # threshold 10, zeros disclosive, dof 10
    facts = CellFacts(stat=np.array(["max", "std", "std", "count", "count", "my_func"], dtype=object),
                      units=np.array([50, 10, 11, 0, 12, 30.0]))
    result = assess(facts, rules)
    assert result.primary.tolist() == [True, True, False, True, False, False]
    assert result.review.tolist() == [False, False, False, False, False, True]
    assert {r.rule for r in result.reasons[3]} == {"zero"}
    allowed = assess(facts, rules.replace(extremes="allow", zeros="allow"))
    assert allowed.primary.tolist() == [False, True, False, False, False, False]


def test_structural_zero_is_publishable() -> None:
    rules = preset("sacro")
    facts = CellFacts(stat=np.array(["count", "count"], dtype=object), units=np.array([0, 0.0]),
                      structural=np.array([True, False]))
    assert assess(facts, rules).primary.tolist() == [False, True]


def test_reasons_never_state_the_hidden_count() -> None:
    result = assess(_counts([1, 2, 3, 4]), preset("humanitarian"))
    for reasons in result.reasons.values():
        for r in reasons:
            assert not any(ch in r.message for ch in "1234"), r.message
