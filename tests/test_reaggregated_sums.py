"""Sums re-aggregated from a finer table of sums (``capture.pandas._reaggregate``, ``facts.merged_sums``).

``df.groupby(["person", "sex"]).income.sum().groupby(level="sex").sum()`` is the table of income
sums by sex. Before, the finer table was read as microdata: its cells taken for contributors (a
district of two cells blocked as "2 contributors") and, for linking, for rows, so one person's
income edited between the sums by sex and the re-aggregated sums made him a new person beside
the old one, and the two tables told his income by subtraction, both ``pass`` (red team rt49/11).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

HIM = (PEOPLE.district == "C") & (PEOPLE.sex == "M")
MAN = float(PEOPLE[HIM].income.iloc[0])

#: (how the finer table is made, how it is summed again) and the direct table it equals
REAGGREGATIONS = {
    "by person, then sex": (lambda d: d.groupby(["person", "sex"]).income.sum().groupby(level="sex").sum(),
                            lambda d: d.groupby("sex").income.sum()),
    "by household, then sex": (lambda d: d.groupby(["household", "sex"]).income.sum().groupby(level="sex").sum(),
                               lambda d: d.groupby("sex").income.sum()),
    "by district and sex, then district": (
        lambda d: d.groupby(["district", "sex"]).income.sum().groupby(level="district").sum(),
        lambda d: d.groupby("district").income.sum()),
    "agg('sum') of the finer table": (
        lambda d: d.groupby(["district", "sex"]).income.sum().groupby(level="district").agg("sum"),
        lambda d: d.groupby("district").income.sum()),
}


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _numbers(out: Any) -> list[float]:
    text = out.data["text/plain"].split("sdc_magic:")[0]
    return [float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*\.\d+", text)]


@pytest.fixture
def fresh() -> Any:
    """A new humanitarian session per call (capture installed), uninstalled last-first."""
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    made: list[Any] = []

    def make() -> Any:
        s = Session(rules=preset("humanitarian"))
        s.capture.install()
        made.append(s)
        return s

    yield make
    for s in reversed(made):
        s.capture.uninstall()


@pytest.mark.parametrize("how", list(REAGGREGATIONS))
def test_a_reaggregation_is_checked_as_the_table_made_from_the_rows(fresh: Any, how: str) -> None:
    again, direct = REAGGREGATIONS[how]
    df = PEOPLE.copy()
    shown = fresh().publish(again(df))
    made = fresh().publish(direct(df))
    assert _status(shown) == _status(made) != "blocked", shown.data["text/plain"]
    assert np.array_equal(shown.checked.hidden, made.checked.hidden), shown.data["text/plain"]
    assert "sums of counts" not in " ".join(shown.checked.notes)


@pytest.mark.parametrize("how", [h for h in REAGGREGATIONS if "then sex" in h])
@pytest.mark.parametrize("order", ["the sums first", "the re-aggregation first"])
def test_an_edit_between_the_sums_and_a_reaggregation(sess: Any, how: str, order: str) -> None:
    again, direct = REAGGREGATIONS[how]
    df = PEOPLE.copy()
    edited = df.assign(income=df.income.mask(HIM, 0.0))
    make = [lambda: direct(df), lambda: again(edited)]
    if order != "the sums first":
        make = [lambda: again(df), lambda: direct(edited)]
    first, second = (sess.publish(m()) for m in make)
    told = [a - b for a in _numbers(first) for b in _numbers(second)]
    assert not any(abs(abs(t) - MAN) < 0.01 for t in told) or "pass" not in {_status(first), _status(second)} \
        or _status(second) not in ("pass", "suppressed"), (first.data["text/plain"], second.data["text/plain"])


def test_one_dominant_contributor_is_found_through_the_finer_table(fresh: Any) -> None:
    # one person holds most of district B's income: dominance hides B whichever way it is summed
    df = PEOPLE.copy()
    df.loc[df.index[df.district == "B"][0], "income"] = 50_000.0
    def dominance() -> Any:
        s = fresh()  # (each computed after its session is installed: the newest captures)
        s.set_rules(dominance="1,85")
        return s

    shown = dominance().publish(df.groupby(["district", "sex"]).income.sum().groupby(level="district").sum())
    made = dominance().publish(df.groupby("district").income.sum())
    assert np.array_equal(shown.checked.hidden, made.checked.hidden)
    assert not any(x > 50_000 for x in _numbers(shown)), shown.data["text/plain"]


def test_with_a_unit_declared_the_finer_cells_are_not_merged(fresh: Any) -> None:
    # a unit (household) may span cells: its contribution to a union is not any cell's, so the
    # finer table is read as before (its cells as contributors: stricter, never looser)
    s = fresh()
    s.set_rules(unit="household")
    df = PEOPLE.copy()
    out = s.publish(df.groupby(["district", "sex"]).income.sum().groupby(level="district").sum())
    assert "C" not in [str(x) for x, hidden in zip(out.checked.frame.index, out.checked.hidden[:, 0], strict=True)
                       if not hidden]


def test_means_of_means_are_not_sums(fresh: Any) -> None:
    df = PEOPLE.copy()
    out = fresh().publish(df.groupby(["district", "sex"]).income.mean().groupby(level="district").mean())
    assert _status(out) == "blocked"  # (a mean of cell means is no statistic of the rows: cells as contributors)
    pd.testing.assert_frame_equal(df, PEOPLE)  # the analyst's frame untouched


def test_a_frame_of_sums_reaggregated_after_an_edit(sess: Any) -> None:
    # the finer table a frame of two sums: its rows are linked by the cells of its first column
    df = PEOPLE.copy()
    first = sess.publish(df.groupby("sex")[["income", "age"]].sum())
    edited = df.assign(income=df.income.mask(HIM, 0.0))
    second = sess.publish(edited.groupby(["person", "sex"])[["income", "age"]].sum().groupby(level="sex").sum())
    told = [a - b for a in _numbers(first) for b in _numbers(second)]
    assert not any(abs(t - MAN) < 0.01 for t in told) or _status(second) not in ("pass", "suppressed"), \
        second.data["text/plain"]


def test_a_crosstab_summed_again_is_still_a_count_table(sess: Any) -> None:
    # its columns are groups of their own (not statistics of one group): counted as before
    df = PEOPLE.copy()
    out = sess.publish(pd.crosstab(df.district, df.sex).groupby(lambda d: d == "C").sum())
    assert out.checked.kind == "table"
    assert out.checked.hidden[1].all()  # C's 2 women and 1 man


# ---- rows placed by their content (no labels of the session's): an edited row is the same person
def test_polars_sums_reaggregated_after_an_edit(sess: Any) -> None:
    pl = pytest.importorskip("polars")
    p = pl.from_pandas(PEOPLE)
    first = sess.publish(p.group_by("sex").agg(pl.col("income").sum()).sort("sex"))
    edited = p.with_columns(pl.when((pl.col("district") == "C") & (pl.col("sex") == "M")).then(0.0)
                            .otherwise(pl.col("income")).alias("income"))
    fine = edited.group_by(["person", "sex"]).agg(pl.col("income").sum())
    second = sess.publish(fine.group_by("sex").agg(pl.col("income").sum()).sort("sex"))
    told = [a - b for a in _numbers(first) for b in _numbers(second)]
    assert not any(abs(t - MAN) < 0.01 for t in told) or _status(second) not in ("pass", "suppressed"), \
        second.data["text/plain"]


def test_a_copy_rebuilt_from_records_with_one_value_edited(sess: Any) -> None:
    df = PEOPLE.copy()
    first = sess.publish(df.groupby("sex").income.sum())
    copy = pd.DataFrame(df.sample(frac=1, random_state=3).to_dict("records"))  # other labels, other order
    copy.loc[(copy.district == "C") & (copy.sex == "M"), "income"] = 0.0
    second = sess.publish(copy.groupby("sex").income.sum())
    told = [a - b for a in _numbers(first) for b in _numbers(second)]
    assert not any(abs(t - MAN) < 0.01 for t in told) or _status(second) not in ("pass", "suppressed"), \
        second.data["text/plain"]


def test_a_copy_rebuilt_from_records_unedited_is_the_same_table(sess: Any) -> None:
    # over-protection: nothing edited, nothing paired, nothing hidden
    df = PEOPLE.copy()
    sess.publish(df.groupby("sex").income.sum())
    copy = pd.DataFrame(df.sample(frac=1, random_state=3).to_dict("records"))
    second = sess.publish(copy.groupby("sex").income.sum())
    assert _status(second) == "pass", second.data["text/plain"]


# ---- red team of this change (stop 49): three levels, counts and sums
@pytest.mark.parametrize("statistic", ["sum", "size"])
def test_three_levels_of_reaggregation_are_linked_to_the_rows(sess: Any, statistic: str) -> None:
    """district × sex × flag → district × sex → sex, without district C, beside everyone by sex:
    C's man (his income, or his count) by subtraction, both ``pass``: only two levels were linked."""
    df = PEOPLE.copy()
    if statistic == "sum":
        first = sess.publish(df.groupby("sex").income.sum())
        finest = df[df.district != "C"].groupby(["district", "sex", "flag"]).income.sum()
    else:
        first = sess.publish(df.groupby("sex").size())
        finest = df[df.district != "C"].groupby(["district", "sex", "flag"]).size()
    second = sess.publish(finest.groupby(level=["district", "sex"]).sum().groupby(level="sex").sum())
    target = MAN if statistic == "sum" else 1.0
    text = [o.data["text/plain"].split("sdc_magic:")[0] for o in (first, second)]
    shown = [[float(x) for x in re.findall(r"-?\d+\.?\d*", t.split("\n", 1)[1])] for t in text]
    told = [a - b for a in shown[0] for b in shown[1]]
    assert not any(abs(t - target) < 0.01 for t in told) or _status(second) not in ("pass", "suppressed"), text


@pytest.mark.parametrize("level", ["sex", 1])
def test_a_reaggregation_after_the_sums_of_one_column(sess: Any, level: Any) -> None:
    """Review of stop 49: the first sums taken from the income alone (``df.income.groupby(df.sex)``),
    so that the income was the only column to confirm the next frame's labels with; his edited
    income made the whole frame other people, his row a new person: both ``pass``."""
    df = PEOPLE.copy()
    first = sess.publish(df.income.groupby(df.sex).sum())
    edited = df.assign(income=df.income.mask(HIM, 0.0))
    second = sess.publish(edited.groupby(["person", "sex"]).income.sum().groupby(level=level).sum())
    told = [a - b for a in _numbers(first) for b in _numbers(second)]
    assert not any(abs(t - MAN) < 0.01 for t in told) or _status(second) not in ("pass", "suppressed"), \
        second.data["text/plain"]
