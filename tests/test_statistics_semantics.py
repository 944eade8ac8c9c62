"""Leak classes of statistics semantics (issue 10, items 1–6 and 9), checked in-process.

Each test builds a small frame with known small groups, captures a researcher-style
call with the extension's capture installed, and states which cells must be hidden (or
which status the output must have). A second module (``test_leak_notebook.py``) runs
the same kinds of snippets in a real kernel and scans every mime type, the export folder
and the redacted copy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.checking.row_order import HIDDEN_LAST_NOTE
from sdc_magic.jupyter.session import Session
from sdc_magic.protect import certificate

#: the same frame is built in the notebook test's kernel (source text, executed there)
DATA_SOURCE = '''
def make_leak_data():
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(7)
    sizes = {"R1": 40, "R2": 30, "R3": 50, "R4": 45}
    flags = {"R1": 2, "R2": 28, "R3": 20, "R4": 10}  # R1: 2 with the flag, R2: 2 without it
    rows = []
    for r, n in sizes.items():
        for i in range(n):
            rows.append({"region": r, "flag": int(i < flags[r]), "sick": i < flags[r],
                         "hh": f"{r}-h{i % 2}" if r == "R1" else f"{r}-h{i}",
                         "income": float(rng.integers(1000, 5000)), "age": int(rng.integers(20, 70))})
    d = pd.DataFrame(rows)
    d["pid"] = np.arange(len(d))
    d.loc[d.index[d.region == "R3"][0], "income"] = 987654.0   # dominates R3
    d.loc[d.index[d.region == "R4"][0], "income"] = 123457.0   # the maximum of R4
    d.loc[d.index[d.region == "R2"][0], "age"] = 101           # one person's age
    cats = ["A"] * 60 + ["B"] * 45 + ["C"] * 3 + ["D"] * 40 + ["E"] * 2 + ["F"] * 15
    d["cat"] = cats
    return d
'''
namespace: dict = {}
exec(DATA_SOURCE, namespace)
make_leak_data = namespace["make_leak_data"]


@pytest.fixture()
def sess() -> Session:
    return Session()


@pytest.fixture()
def d() -> pd.DataFrame:
    return make_leak_data()


def hidden_labels(checked) -> set[str]:
    frame = checked.frame
    out = set()
    for i, j in zip(*np.nonzero(checked.hidden), strict=True):
        row = frame.index[i]
        row = "|".join(map(str, row)) if isinstance(row, tuple) else row
        col = frame.columns[j] if isinstance(frame, pd.DataFrame) else None
        out.add(f"{row}|{col}" if col is not None else str(row))
    return out


def test_indicator_sum_and_mean_are_counts(sess, d):
    with sess.capturing():
        total = d.groupby("region")["flag"].sum()
        share = d.groupby("region")["flag"].mean()
        sick = d.groupby("region")["sick"].sum()  # a boolean column counts people too
    for table in (total, share, sick):
        checked = sess.check(table)
        assert {"R1", "R2"} <= hidden_labels(checked), (table.name, hidden_labels(checked))
        assert checked.status in ("suppressed", "blocked")
        rules = {r.rule for rs in checked.reasons.values() for r in rs}
        assert "threshold" in rules
        assert "dominance" not in rules  # no magnitude rules on a 0/1 variable
    messages = {r.message for rs in sess.check(total).reasons.values() for r in rs}
    assert any("have this attribute" in m for m in messages)
    assert any("lack this attribute" in m for m in messages)


def test_lack_side_interval_reaches_the_threshold(sess, d):
    """R2 has 28 of 30 with the flag: the attacker must not learn that fewer than 5 lack it."""
    with sess.capturing():
        table = d.groupby(["region", "cat"])["flag"].sum().unstack()
        plain = d.groupby("region")["flag"].sum()
    for t in (table, plain):
        checked = sess.check(t)
        assert checked.status in ("suppressed", "blocked")
    checked = sess.check(plain)
    sizes = d.groupby("region").size()
    for (i, _), (lo, _hi) in checked.intervals.items():
        region = checked.frame.index[i]
        if region == "R2":
            assert sizes[region] - lo >= 5, "the complement must be able to reach the threshold"
        if region == "R1":
            assert _hi >= 5


def test_indicator_with_unit_column_counts_distinct_units(sess, d):
    d = pd.concat([d, d[d.region == "R3"].head(3)], ignore_index=True)  # repeated rows of R3 people
    sess.set_rules(unit="pid")
    with sess.capturing():
        total = d.groupby("region")["flag"].sum()
    checked = sess.check(total)
    assert {"R1", "R2"} <= hidden_labels(checked)


def test_named_agg_indicator_next_to_size(sess, d):
    with sess.capturing():
        table = d.groupby("region").agg(n=("flag", "size"), with_flag=("flag", "sum"))
    hidden = hidden_labels(sess.check(table))
    assert {"R1|with_flag", "R2|with_flag"} <= hidden
    assert not {"R1|n", "R2|n", "R3|n", "R4|n"} & hidden  # sizes of 30+ are published
    # the flagged total and the unflagged total are both known to an attacker (assumed margins):
    # each side's pattern needs a secondary, so R3 and R4 go too
    checked = sess.check(table)
    assert checked.status == "suppressed" and (checked.intervals[(0, 1)][1] >= 5)


def test_distinct_counts_are_counts(sess, d):
    with sess.capturing():
        households = d.groupby("region")["hh"].nunique()
        named = d.groupby("region").agg(households=("hh", "nunique"), people=("pid", "nunique"))
    assert "R1" in hidden_labels(sess.check(households))
    hidden = hidden_labels(sess.check(named))
    assert "R1|households" in hidden
    assert "R1|people" not in hidden or "R1|households" in hidden  # 40 people in R1 may be shown


def test_quantile_extremes_are_individual_values(sess, d):
    with sess.capturing():
        q = d.groupby("region")["income"].quantile([0, 0.5, 1])
        desc = d.groupby("region")["income"].describe(percentiles=[0, 0.5, 1])
        top = d.groupby("region")["income"].quantile(1.0)
    checked = sess.check(q)
    hidden = hidden_labels(checked)
    assert all(f"{r}|0.0" in hidden and f"{r}|1.0" in hidden for r in ("R1", "R2", "R3", "R4")), hidden
    assert not any(h.endswith("0.5") for h in hidden)  # medians of 30+ units are published
    hidden = hidden_labels(sess.check(desc))
    for r in ("R1", "R4"):
        assert {f"{r}|min", f"{r}|0%", f"{r}|100%", f"{r}|max"} <= hidden, hidden
        assert f"{r}|50%" not in hidden and f"{r}|count" not in hidden
    assert hidden_labels(sess.check(top)) == {"R1", "R2", "R3", "R4"}


def test_far_quantile_of_a_small_group_is_an_extreme(sess, d):
    with sess.capturing():
        q = d.groupby("region")["income"].quantile(0.99)  # 40..50 units: less than one beyond
        q9 = d.groupby("region")["income"].quantile(0.9)  # 4 or more units beyond: frequency only
    assert len(hidden_labels(sess.check(q))) == 4
    assert hidden_labels(sess.check(q9)) == set()


def test_spread_of_a_dominated_variable_is_primary(sess, d):
    sess.use_preset("insee")
    with sess.capturing():
        table = d.groupby("region")["income"].agg(["count", "mean", "std"])
        var = d.groupby("region")["income"].var()
    hidden = hidden_labels(sess.check(table))
    assert {"R3|mean", "R3|std"} <= hidden
    assert "R3|count" not in hidden and "R1|std" not in hidden
    assert hidden_labels(sess.check(var)) == {"R3"}
    reasons = {r.rule for rs in sess.check(var).reasons.values() for r in rs}
    assert reasons & {"dominance", "p_percent"}


def test_numeric_label_of_one_person_goes_to_review(sess, d):
    with sess.capturing():
        ages = d.groupby("age").size()
        bands = d.groupby(pd.cut(d.age, [0, 40, 60, 120])).size()
    checked = sess.check(ages)
    assert checked.status == "review"
    assert any("band age" in n or "band this dimension" in n for n in checked.notes)
    label_reasons = [r for rs in checked.reasons.values() for r in rs if r.rule == "label"]
    assert label_reasons
    assert sess.check(bands).status in ("pass", "suppressed")  # banded: nothing to flag


def test_small_number_written_in_a_label_goes_to_review(sess, d):
    with sess.capturing():
        table = d.groupby("region").size()
    renamed = table.rename(index={"R1": "R1 (n=3)"})
    checked = sess.check(renamed)
    assert checked.status == "review"
    assert any("states a number" in n for n in checked.notes)
    fine = table.rename(index={"R1": "R1 (2024)"})
    assert sess.check(fine).status != "review" or "states a number" not in " ".join(sess.check(fine).notes)


def test_value_sorted_table_lists_hidden_rows_last(sess, d):
    with sess.capturing():
        counts = d["cat"].value_counts()
        ascending = d.groupby("cat").size().sort_values()
    for table in (counts, ascending):
        published = sess.publish(table)
        checked = published.checked
        rows_hidden = checked.hidden.any(axis=1)
        assert rows_hidden.sum() >= 2
        first_hidden = int(np.flatnonzero(rows_hidden)[0])
        assert rows_hidden[first_hidden:].all(), "hidden rows must all come after the published ones"
        labels = [str(x) for x in checked.frame.index[rows_hidden]]
        assert labels == sorted(labels)
        shown = [str(x) for x in checked.frame.index[~rows_hidden]]
        assert "C" not in shown and "E" not in shown
        if table is ascending:  # the small cells came first: moved, and the banner says so
            assert HIDDEN_LAST_NOTE in checked.notes
        text = published.data["text/plain"]
        assert text.index("✕") > max(text.index(lab) for lab in shown)
    label_sorted = sess.check(d.groupby("cat").size())
    assert HIDDEN_LAST_NOTE not in label_sorted.notes  # label order reveals nothing: left as is


def test_reaggregated_counts_are_a_count_table(sess, d):
    with sess.capturing():
        counts = d.groupby(["region", "cat"]).size()
        per_region = counts.groupby(level=0).sum()
        per_cat = counts.groupby(level="cat").sum()
    checked = sess.check(per_region)
    assert checked.kind == "table" and checked.status == "pass"
    checked = sess.check(per_cat)
    assert checked.kind == "table"
    assert {"C", "E"} <= hidden_labels(checked)


def test_ranks_and_shares_are_not_taken_for_counts(sess):
    ranks = pd.Series([1.0, 2.0, 3.0, 4.0], index=list("abcd"))
    shares = pd.Series([0.0, 0.25, 1.0, 0.75], index=list("abcd"))
    counts = pd.Series([3, 12, 40, 2], index=list("abcd"))
    assert sess.check(ranks).hidden.sum() == 0 and sess.check(ranks).status == "review"
    assert sess.check(shares).hidden.sum() == 0 and sess.check(shares).status == "review"
    assert sess.check(counts).hidden.sum() == 2  # whole numbers without evidence are still counts


def test_real_category_called_total_is_not_a_margin(sess):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.choice(["Total", "X", "Y"], 300), "b": rng.choice(list("PQRS"), 300)})
    df.loc[:2, "b"] = "Z"
    with sess.capturing():
        table = pd.crosstab(df.a, df.b, margins=True)
    checked = sess.check(table)
    assert checked.status == "suppressed"
    assert "Total|Z" not in hidden_labels(checked) or table.loc["Total", "Z"] < 5
    assert {"X|Z", "Y|Z"} & hidden_labels(checked)


def test_certificate_follows_cells_hidden_after_protection(sess):
    """A cell hidden after the protection model was built (as the joint audit does) is no
    longer published by the certificate, and the recomputed intervals verify."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"r": rng.choice(list("ABC"), 400), "c": rng.choice(list("xyz"), 400)})
    df.loc[:1, ["r", "c"]] = ["A", "w"]
    with sess.capturing():
        table = pd.crosstab(df.r, df.c, margins=True)
    checked = sess.check(table)
    assert checked.status == "suppressed" and checked.models
    # hide one more published inner cell, as a joint audit with earlier outputs would
    published = [(i, j) for i in range(checked.hidden.shape[0] - 1) for j in range(checked.hidden.shape[1] - 1)
                 if not checked.hidden[i, j]]
    i, j = published[0]
    flat_index = int(np.flatnonzero((checked.cell_rows == i) & (checked.cell_cols == j))[0])
    checked.hidden[i, j] = True
    checked.hidden_flat[flat_index] = True
    assert certificate.finalise(checked) >= 1
    assert certificate.finalise(checked) == 0  # idempotent
    cert = certificate.build("out-x", checked, "out-x.csv", "0" * 64)
    row_label, col_label = str(table.index[i]), str(table.columns[j])
    for t in cert["tables"]:
        for cell in t["cells"]:
            if cell["labels"] == [row_label, col_label] or cell["labels"] == [col_label, row_label]:
                assert cell["status"] != "safe" and "value" not in cell
    assert certificate.verify_certificate(cert) == []
    assert (i, j) in checked.intervals


def test_two_valued_coding_is_an_indicator_too(sess, d):
    d = d.assign(coded=np.where(d.flag == 1, 1, 2))  # 1 = yes, 2 = no: sum = 2n - yes
    with sess.capturing():
        total = d.groupby("region")["coded"].sum()
        plain = d.groupby("region")["age"].sum()  # many values: a magnitude, not a count
    assert {"R1", "R2"} <= hidden_labels(sess.check(total))
    assert sess.check(plain).status == "pass"


def test_small_whole_number_from_an_unknown_statistic_is_hidden(sess, d):
    """``agg(lambda s: s.sum())`` of a flag: we cannot know it is a count, so a small whole
    number is hidden like one (and the table needs review)."""
    with sess.capturing():
        table = d.groupby("region")["flag"].agg(lambda s: s.sum())
        means = d.groupby("region")["income"].agg(lambda s: s.mean())  # not whole numbers: shown
    checked = sess.check(table)
    assert "R1" in hidden_labels(checked) and checked.status != "pass"
    assert sess.check(means).hidden.sum() == 0 and sess.check(means).status == "review"


@pytest.mark.parametrize("how", ["value_counts", "sort_values descending", "duckdb order by", "polars sort"])
def test_hidden_rows_already_last_are_put_in_label_order(sess, how):
    """Issue 23.13: sorted by value *descending*, the small cells already come last, but in value
    order: "Zed ✕, Ab ✕" says Zed ≥ Ab, and with their sum known (the total less the published
    rows) Ab is pinned to [0; 2.5]. The hidden rows are put in label order whatever the sort."""
    df = pd.DataFrame({"district": ["A"] * 40 + ["B"] * 30 + ["C"] * 25 + ["Zed"] * 3 + ["Ab"] * 2})
    with sess.capturing():
        if how == "value_counts":
            table = df["district"].value_counts()
        elif how == "sort_values descending":
            table = df.groupby("district").size().sort_values(ascending=False)
        elif how == "duckdb order by":
            duckdb = pytest.importorskip("duckdb")
            table = duckdb.sql("select district, count(*) as n from df group by district order by n desc").df()
        else:
            pl = pytest.importorskip("polars")
            table = pl.from_pandas(df).group_by("district").len().sort("len", descending=True)
    published = sess.publish(table)
    assert published.metadata["sdc_magic"]["status"] in ("suppressed", "review"), published.metadata["sdc_magic"]
    text = published.data["text/plain"]
    assert "Ab" in text and "Zed" in text
    assert text.index("Ab") < text.index("Zed"), text  # label order, not the values' order
