"""Bad input is refused with a clear message; impossible protection is reported, never leaked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import audit, protect, protection_levels
from sdc_magic.protect.api import clear_cache


def small() -> pd.DataFrame:
    return pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "n": [1, 6, 7, 8]})


def test_non_additive_user_margin_is_refused_with_the_cell_named() -> None:
    df = pd.concat([small(), pd.DataFrame({"a": ["x"], "b": ["Total"], "n": [9]})], ignore_index=True)
    with pytest.raises(ValueError, match=r"a='x' × b='Total'.*is 9 .* add up to 7.*not additive"):
        protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3))


def test_additive_user_margins_are_accepted_and_rebuilt() -> None:
    df = pd.concat([small(), pd.DataFrame({"a": ["x", "Total"], "b": ["Total", "Total"], "n": [7, 22]})],
                   ignore_index=True)
    with_margins = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3))
    without = protect(small(), dims=["a", "b"], value="n", rules=Rules(threshold=3))
    pd.testing.assert_frame_equal(with_margins.cells, without.cells)


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (small().assign(n=[1, -6, 7, 8]), "negative count"),
        (small().assign(n=[1, np.nan, 7, 8]), "missing or non-numeric"),
        (small().assign(a=["x", None, "y", "y"]), "NaN label in dimension 'a'"),
        (small().assign(b=["p", "p", "p", "q"]), "duplicated cell a='x' × b='p'"),
        (small().drop(columns="b"), r"missing column\(s\) \['b'\]"),
    ],
)
def test_bad_input_raises_value_error(frame: pd.DataFrame, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        protect(frame, dims=["a", "b"], value="n", rules=Rules(threshold=3))


def test_negative_magnitudes_are_allowed_and_unbounded_below() -> None:
    df = small().assign(n=[1.0, -6.0, 7.0, 8.0], units=[1, 4, 4, 4])
    res = protect(df, dims=["a", "b"], value="n", units="units", rules=Rules(threshold=3), singletons=False)
    assert res.audit_ok
    hidden = res.cells[res.hidden]
    assert np.isneginf(hidden.lower).all()


def test_single_cell_table() -> None:
    df = pd.DataFrame({"a": ["x"], "n": [2]})
    res = protect(df, dims=["a"], value="n", rules=Rules(threshold=3))
    # the total *is* the cell, so it fails the rule too: nothing can be published
    assert (res.cells.status == "primary").all() and res.audit_ok
    assert np.isposinf(res.cells.upper).all()
    shown = protect(df, dims=["a"], value="n", rules=Rules(threshold=3), margins="published")
    assert not shown.audit_ok
    assert (shown.cells.status != "safe").all()
    assert "No suppression pattern can protect" in shown.message and "published" in shown.message


def test_everything_primary() -> None:
    df = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "n": [1, 1, 1, 1]})
    res = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=5))
    assert (res.cells.status == "primary").all()
    assert res.audit_ok
    pub = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=5), margins="published")
    assert not pub.audit_ok and (pub.cells.status != "safe").all()


def test_infeasible_when_a_published_margin_equals_a_primary() -> None:
    # row y has one cell: its published row total is that cell
    df = pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "p"], "n": [9, 8, 2]})
    res = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3), margins="published")
    assert not res.audit_ok
    assert (res.cells.status != "safe").all()
    assert "y / Total (it fails the rules but is a published margin)" in res.message


def test_callers_frame_is_not_modified() -> None:
    df = small()
    before = df.copy()
    protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3))
    audit(df.assign(h=[True, True, False, False]), dims=["a", "b"], value="n", hidden="h")
    pd.testing.assert_frame_equal(df, before)


def test_progress_is_reported_and_interrupts_propagate() -> None:
    calls: list[tuple[str, float | None]] = []
    protect(small(), dims=["a", "b"], value="n", rules=Rules(threshold=3), progress=lambda m, f: calls.append((m, f)))
    assert calls and calls[-1] == ("protect: done", 1.0)

    def interrupt(message: str, fraction: float | None) -> None:
        if message.startswith("audit"):
            raise KeyboardInterrupt

    clear_cache()  # the same table again would be answered from the cache, without a search
    with pytest.raises(KeyboardInterrupt):
        protect(small(), dims=["a", "b"], value="n", rules=Rules(threshold=3), progress=interrupt)


def test_protection_levels_conventions() -> None:
    rules = Rules(threshold=5, protection=10.0)
    lpl, upl = protection_levels(np.array([2.0, 40.0]), rules=rules, frequency=True,
                                 reasons=[["threshold"], ["a-priori"]])
    assert list(upl) == [3.0, 4.0]  # up to the threshold; 10 %
    assert list(lpl) == [1.0, 4.0]  # minimal width 1 for counts; 10 %
    dom = Rules(threshold=1, dominance=(1, 85.0), p=10.0)
    lpl, upl = protection_levels(np.array([100.0]), rules=dom, frequency=False,
                                 reasons=[["dominance", "p_percent"]], top=np.array([[95.0, 3.0]]))
    # dominance: 100·95/85 − 100 = 11.76; p%: 9.5 − (100 − 95 − 3) = 7.5; 10 % = 10
    assert np.isclose(upl[0], 100 * 95 / 85 - 100) and np.isclose(lpl[0], upl[0])


def _magnitudes() -> pd.DataFrame:
    return pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "v": [100.0, 80.0, 90.0, 70.0],
                         "u": [4, 5, 6, 3], "x1": [95.0, 30.0, 40.0, 30.0], "x2": [2.0, 20.0, 20.0, 25.0]})


@pytest.mark.parametrize("change,words", [
    (lambda df: df.assign(x1=[np.nan, 30.0, 40.0, 30.0]), "missing or non-numeric"),
    (lambda df: df.assign(x2=[2.0, np.nan, 20.0, 25.0]), "missing or non-numeric"),
    (lambda df: df.assign(x1=[1.0, 30.0, 40.0, 30.0]), "descending"),
    (lambda df: df.assign(u=[0, 5, 6, 3]), "no units"),
])
def test_bad_largest_contributions_are_refused_not_ignored(change, words) -> None:
    """A NaN in a top column used to switch dominance and p % off for that cell (95 % published)."""
    rules = Rules(threshold=3, dominance=(1, 85.0), p=10.0)
    good = protect(_magnitudes(), dims=["a", "b"], value="v", units="u", top=["x1", "x2"], rules=rules)
    assert good.cells.loc[0, "status"] == "primary"  # 95 of 100: dominance
    with pytest.raises(ValueError, match=words):
        protect(change(_magnitudes()), dims=["a", "b"], value="v", units="u", top=["x1", "x2"], rules=rules)


def test_a_missing_second_contribution_of_a_one_unit_cell_is_fine() -> None:
    df = _magnitudes().assign(u=[1, 5, 6, 3], x1=[100.0, 30.0, 40.0, 30.0], x2=[np.nan, 20.0, 20.0, 25.0])
    res = protect(df, dims=["a", "b"], value="v", units="u", top=["x1", "x2"],
                  rules=Rules(threshold=3, dominance=(1, 85.0), p=10.0))
    assert res.cells.loc[0, "status"] == "primary"
