"""Red team, round 6: tables of shares (3d6aa43), aggregation results never row-level (993f957),
re-display reusing the earlier decision (a0103cc).

Data: 400 people in districts A-E plus district Z, two people (zed, 101 years, visit 2024-02-03;
zoe, 99, 2024-05-06), both women, both cases ``closed``. Humanitarian preset: threshold 5.

A test marked ``xfail(strict=True, reason="leak: ...")`` shows a leak: its assertion fails on the
recovered hidden figure with every output involved cleared (``pass`` / ``suppressed``), unless
the reason says otherwise. ``test_stopped_*`` tests are attacks that are correctly stopped.

Leaks found (the first and the last are fixed in c030467 and are regression tests now):

* **The "why hidden" list draws the exact interval of a share's second hidden cell.** In
  ``pd.crosstab(df.district, df.outcome, normalize="index")`` the shares rule hides Z·open beside
  Z·closed and the HTML says "Z · open ... somewhere between 0 and 0" (the metadata too:
  ``interval [0, 0]``); Z·referred is shown as 0.0, so Z·closed = 1 - 0 - 0 = 1: all of
  district Z's cases are closed. (B · referred: "between 21 and 21", its exact count.)
* **Two share tables of the same data (rows, then columns).** The row shares hide Z·closed and
  Z·open (the shares rule hides the zero); the column shares publish Z·open = 0.0. So the row
  share of Z·closed is 1 - 0 - 0 = 1. The same with the count crosstab instead of the column
  shares (it shows Z·open = 0): the shares rule's second cell is a zero that every other table
  of the data publishes.
* **A filter on the aggregated values.** ``t[t == 2]`` (t = size by district) is cleared with one
  row, Z ✕: with the code beside it, Z's count is 2.
* (on screen, blocked) ``.copy()`` / ``.T`` / ``.rename()`` / ``[["min"]]`` of an aggregation lose the
  mark and are drawn as row-level data: Z's two visit dates on screen (not exportable).

Stopped: shares x100, rounded, transposed, sorted; stacked shares with an absent zero (review);
join-of-names and rolling aggregations (review); arithmetic / ``astype`` / ``to_dict`` round trips of
counts; describe of a count table; re-display after a change of rules, of values, of a
subset with identical counts, of another unit.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import HIDDEN

CLEARED = ("pass", "suppressed")


@pytest.fixture
def s():
    sess = Session(rules=preset("humanitarian"))
    sess.capture.install()
    yield sess
    sess.capture.uninstall()


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({
        "district": rng.choice(list("ABCDE"), n), "sex": rng.choice(["F", "M"], n),
        "outcome": rng.choice(["open", "closed", "referred"], n), "age": rng.integers(0, 90, n),
        "visit_date": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 300, n), unit="D"),
        "name": [f"p{i}" for i in range(n)], "case_id": np.arange(n)})
    few = pd.DataFrame({"district": ["Z", "Z"], "sex": ["F", "F"], "outcome": ["closed", "closed"],
                        "age": [101, 99], "visit_date": pd.to_datetime(["2024-02-03", "2024-05-06"]),
                        "name": ["zed", "zoe"], "case_id": [900, 901]})
    return pd.concat([df, few], ignore_index=True)


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def _shown(out, row, col=None) -> str:
    """The text drawn for one cell (from the checked frame as rendered)."""
    frame = out.checked.frame
    i = list(frame.index).index(row)
    j = 0 if col is None else list(frame.columns).index(col)
    return HIDDEN if out.checked.hidden[i, j] else str(frame.iat[i, j])


def _share_recovered_from(row_shares, published_elsewhere: dict[str, float], row, target) -> float | None:
    """The hidden share ``target`` of ``row`` when every other cell of the row is known."""
    frame = row_shares.checked.frame
    known = {}
    for col in frame.columns:
        if col == target:
            continue
        text = _shown(row_shares, row, col)
        if text != HIDDEN:
            known[col] = float(text)
        elif col in published_elsewhere:
            known[col] = published_elsewhere[col]
        else:
            return None
    return 1.0 - sum(known.values())


# ---------------------------------------------------------------- 1. tables of shares: leaks
# fixed: the shares rule's second cell is made primary before protection runs again, so its
# interval is the attacker's real one (was: 'Z · open … somewhere between 0 and 0')
def test_share_secondary_interval_is_drawn_exactly(s) -> None:
    df = _people()
    out = s.publish(pd.crosstab(df.district, df.outcome, normalize="index"))
    assert _status(out) in CLEARED
    assert _shown(out, "Z", "closed") == HIDDEN and _shown(out, "Z", "open") == HIDDEN
    html = out.data["text/html"]
    m = re.search(r"<b>Z · open</b>[^<]*?somewhere between (-?[\d.]+) and (-?[\d.]+)", html)
    exact = m is not None and float(m.group(1)) == float(m.group(2))
    if exact:  # the attacker's arithmetic
        recovered = _share_recovered_from(out, {"open": float(m.group(1))}, "Z", "closed")
        assert recovered == pytest.approx(1.0)
    assert not exact, "the hidden Z·open is drawn as an exact interval"


@pytest.mark.xfail(strict=True, reason="leak: row shares hide Z·closed and Z·open; column shares (cleared) show "
                                       "Z·open 0.0; Z·referred 0.0: row share Z·closed = 1-0-0 = 1 (all closed)")
def test_row_shares_then_column_shares(s) -> None:
    df = _people()
    rows = s.publish(pd.crosstab(df.district, df.outcome, normalize="index"))
    cols = s.publish(pd.crosstab(df.district, df.outcome, normalize="columns"))
    assert _status(rows) in CLEARED and _status(cols) in CLEARED
    assert _shown(rows, "Z", "closed") == HIDDEN
    elsewhere = {c: float(_shown(cols, "Z", c)) for c in ("open", "referred")
                 if _shown(cols, "Z", c) != HIDDEN and float(_shown(cols, "Z", c)) == 0.0}
    recovered = _share_recovered_from(rows, elsewhere, "Z", "closed")
    assert recovered is None, f"Z·closed's hidden row share is {recovered}"


@pytest.mark.xfail(strict=True, reason="leak: row shares hide Z·closed and the zero Z·open; the count crosstab "
                                       "(cleared) shows Z·open 0: row share Z·closed = 1-0-0 = 1")
def test_row_shares_then_counts(s) -> None:
    df = _people()
    rows = s.publish(pd.crosstab(df.district, df.outcome, normalize="index"))
    counts = s.publish(pd.crosstab(df.district, df.outcome))
    assert _status(rows) in CLEARED and _status(counts) in CLEARED
    assert _shown(rows, "Z", "closed") == HIDDEN
    zeros = {c: 0.0 for c in ("open", "referred") if _shown(counts, "Z", c) == "0"}
    recovered = _share_recovered_from(rows, zeros, "Z", "closed")
    assert recovered is None, f"Z·closed's hidden row share is {recovered}"


# ---------------------------------------------------------------- 1. tables of shares: stopped
@pytest.mark.parametrize("code", [
    'pd.crosstab(df.district, df.sex, normalize="index") * 100',
    'pd.crosstab(df.district, df.sex, normalize="index").round(2)',
    'pd.crosstab(df.district, df.sex, normalize="index").sort_values("F")',
    'df.groupby("district")["sex"].value_counts(normalize=True).unstack(fill_value=0)',
])
def test_stopped_share_derivations_keep_two_hidden_in_z(s, code: str) -> None:
    df = _people()
    out = s.publish(eval(code, {"df": df, "pd": pd}))
    assert _status(out) in CLEARED
    assert _shown(out, "Z", "F") == HIDDEN and _shown(out, "Z", "M") == HIDDEN


def test_stopped_transposed_shares(s) -> None:
    df = _people()
    out = s.publish(pd.crosstab(df.district, df.sex, normalize="index").T)
    frame = out.checked.frame
    j = list(frame.columns).index("Z")
    assert out.checked.hidden[:, j].all()


def test_stopped_stacked_shares_with_an_absent_zero(s) -> None:
    df = _people()
    out = s.publish(df.groupby("district")["sex"].value_counts(normalize=True).sort_values())
    assert _status(out) == "review"


# ---------------------------------------------------------------- 2. aggregations: leaks
# fixed: a selection whose labels pin hidden values is withheld (checking/lineage.py labels_pinned)
def test_filter_on_aggregated_values(s) -> None:
    df = _people()
    t = df.groupby("district").size()
    out = s.publish(t[t == 2])
    assert not (_status(out) in CLEARED and list(out.checked.frame.index) == ["Z"]), \
        "the rows kept by a filter on hidden values tell the value"


# fixed: copy, T, rename, column selection, astype, sort, set_index, head, apply, pipe... of an
# aggregation's result carry its mark (.loc / .iloc do not: see docs/known-gaps.md)
@pytest.mark.parametrize("suffix", [".copy()", ".T", '.rename(columns={"min": "first"})', '[["min", "count"]]',
                                    ".astype(str)", '.sort_values("count")', ".head(10)",
                                    ".pipe(lambda t: t)"])
def test_derived_aggregation_drawn_as_row_level(s, suffix: str) -> None:
    df = _people()
    out = s.publish(eval('df.groupby("district")["visit_date"].agg(["min", "max", "count"])' + suffix,
                         {"df": df}))
    assert out.metadata["sdc_magic"].get("kind") != "row-level"
    assert "2024-02-03" not in out.data["text/plain"] + out.data["text/html"]


# ---------------------------------------------------------------- 2. aggregations: stopped
@pytest.mark.parametrize("code", [
    't.astype(str)', 't.astype(float)', 't * 1', 'pd.Series(t.to_dict())', 'pd.DataFrame({"n": t})',
    't.to_frame("n").T', 't.reindex(list("ZABCDE"))', 't.where(t > 5)',
    'df.assign(n=df.groupby("district")["case_id"].transform("size"))[["district", "n"]].drop_duplicates()'
    '.set_index("district")["n"]',
])
def test_stopped_count_round_trips_keep_z_hidden(s, code: str) -> None:
    df = _people()
    t = df.groupby("district").size()
    out = s.publish(eval(code, {"df": df, "t": t, "pd": pd}))
    assert _status(out) in CLEARED
    frame, hidden = out.checked.frame, out.checked.hidden
    if "Z" in list(frame.index):
        assert hidden[list(frame.index).index("Z")].all()
    else:
        assert hidden[:, list(frame.columns).index("Z")].all()


@pytest.mark.parametrize("code", [
    'df.groupby("district").agg(n=("case_id", "count"), who=("name", lambda s: ",".join(s)))',
    'df.groupby("district")["name"].agg(lambda s: s.iloc[0])',
    'df.sort_values("visit_date").groupby("district")["age"].rolling(2).max()',
    'df.groupby("district")["age"].expanding().max()',
    'df.groupby("district").apply(lambda x: pd.DataFrame({"n": [len(x)], "last": [x.visit_date.max()]}))',
])
def test_stopped_unwrapped_aggregations_need_review(s, code: str) -> None:
    df = _people()
    out = s.publish(eval(code, {"df": df, "pd": pd}))
    assert _status(out) not in CLEARED
    for secret in ("zed", "zoe", "2024-02-03", "2024-05-06"):
        assert secret not in out.data["text/plain"]


def test_stopped_describe_of_a_count_table(s) -> None:
    df = _people()
    t = df.groupby("district").size()
    s.publish(t)
    out = s.publish(t.describe())
    assert _status(out) == "blocked"


# ---------------------------------------------------------------- 3. re-display: stopped
def _same(out) -> bool:
    return any("the same table as" in n for n in out.checked.notes)


def test_stopped_redisplay_after_new_rules(s) -> None:
    df = _people()
    first = s.publish(df.groupby(["district", "outcome"]).size())
    s.set_rules(threshold=30)
    again = s.publish(df.groupby(["district", "outcome"]).size())
    assert not _same(again)
    assert again.checked.hidden.sum() > first.checked.hidden.sum()


def test_stopped_redisplay_after_in_place_mutation(s) -> None:
    df = _people()
    t1 = df.groupby("district").size()
    s.publish(t1)
    df.loc[df.index[0], "district"] = "Z"  # a third person joins Z
    again = s.publish(df.groupby("district").size())
    assert not _same(again)


def test_stopped_identical_table_of_a_subset(s) -> None:
    df = _people()
    df["flag"] = 0
    df.loc[df.index[-1], "flag"] = 1  # zoe
    s.publish(df.groupby(["district", "outcome"]).size())
    sub = df[df["flag"] == 0]  # zoe gone: Z closed 2 -> 1 (the table changes)
    again = s.publish(sub.groupby(["district", "outcome"]).size())
    assert not _same(again)
    # the same people re-indexed (a filter that keeps everyone): the same table, reused, and
    # it hides exactly what out-1 hid (it publishes nothing new)
    kept = df[df["age"] >= 0].copy()
    kept.index = kept.index + 10_000
    other = s.publish(kept.groupby(["district", "outcome"]).size())
    assert np.array_equal(other.checked.hidden, s.publish(df.groupby(["district", "outcome"]).size()).checked.hidden)


def test_stopped_redisplay_with_another_unit(s) -> None:
    df = _people()
    df["household"] = df["case_id"] // 2
    s.publish(df.groupby("district").size())
    s.set_rules(unit="household")
    again = s.publish(df.groupby("district").size())
    assert not _same(again)


def test_stopped_redisplay_shares_vs_counts(s) -> None:
    df = _people()
    s.publish(pd.crosstab(df.district, df.sex))
    shares = s.publish(pd.crosstab(df.district, df.sex, normalize="index"))
    assert not _same(shares)
