"""Medians and extremes tell nobody how many people a group holds: linking does not take their
published cells for known sizes (``linking.differencing.tells_no_sizes``).

Why (red team, stop 50): after the counts by sex (73 people), the medians by district hid B's
median (30 people) "after a joint audit with earlier outputs" — the audit read A's and B's medians as
their counts and found C = 73 − 40 − 30; after the medians, the counts by sex hid M. Alone, each of
those tables is shown whole. What must stay closed: the same medians never make the next count
table's cells public (the leak of stop 50: medians, counts by district hiding C alone, shares gave
C = 73 − 40 − 30 = 3).
"""

from __future__ import annotations

import dataclasses

import pytest
from test_engines_redteam import PEOPLE

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.linking.differencing import tells_no_sizes

X = "✕"


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _body(out) -> str:
    return out.data["text/plain"].split("sdc_magic:")[0]


def _cells(out) -> dict[str, list[str]]:
    found = {}
    for line in _body(out).splitlines():
        words = line.split()
        if len(words) >= 2:
            found[words[0]] = words[1:]
    return found


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def test_medians_after_the_counts_by_sex_show_every_district_but_c(sess: Session) -> None:
    df = PEOPLE.copy()
    sess.publish(df.sex.value_counts())
    medians = sess.publish(df.groupby("district").income.median())
    assert _status(medians) == "suppressed"
    cells = _cells(medians)
    assert cells["A"] != [X] and cells["B"] != [X] and cells["C"] == [X]
    assert not any("joint audit" in n for n in medians.checked.notes)


def test_counts_by_sex_after_the_medians_hide_nothing(sess: Session) -> None:
    df = PEOPLE.copy()
    sess.publish(df.groupby("district").income.median())
    counts = sess.publish(df.sex.value_counts())
    assert _status(counts) == "pass"
    assert _cells(counts)["F"] == ["37"] and _cells(counts)["M"] == ["36"]


def test_the_medians_still_make_no_count_public(sess: Session) -> None:
    """Medians, then the district counts: B is hidden beside C as in a fresh session, so the shares
    cannot give C = total − A − B."""
    df = PEOPLE.copy()
    sess.publish(df.groupby("district").income.median())
    counts = sess.publish(df.district.value_counts())
    cells = _cells(counts)
    assert cells["A"] == ["40"] and cells["B"] == [X] and cells["C"] == [X]
    shares = sess.publish(df.district.value_counts(normalize=True))
    shown = _cells(shares)
    assert shown["B"] == [X] and shown["C"] == [X]


def test_the_medians_in_two_dimensions_make_no_count_public(sess: Session) -> None:
    """Medians by district x sex, the crosstab, its column shares: C's women and men stay hidden
    and cannot be had as a column total minus the published cells."""
    import pandas as pd

    df = PEOPLE.copy()
    sess.publish(df.groupby(["district", "sex"]).income.median().unstack())
    cross = sess.publish(pd.crosstab(df.district, df.sex))
    shares = sess.publish(pd.crosstab(df.district, df.sex, normalize="columns"))
    for out in (cross, shares):
        cells = _cells(out)
        assert cells["C"] == [X, X]
        assert X in cells["B"] or X in cells["A"]  # (a secondary beside C in each column)


def _population(tells):
    @dataclasses.dataclass
    class Pop:
        tells: frozenset | None

    return Pop(tells)


@pytest.mark.parametrize(("tells", "silent"), [
    (frozenset({("median", "income")}), True),
    (frozenset({("median", "income"), ("max", "age")}), True),
    (frozenset({("min", "income"), ("first", "income"), ("last", "income"), ("mode", "sex")}), True),
    (frozenset({("median", "income"), ("count", "")}), False),  # a count beside it
    (frozenset({("mean", "flag")}), False),  # with a sum of the same rows elsewhere: n = sum / mean
    (frozenset({("std", "flag")}), False),  # a flag's spread beside its mean gives n
    (frozenset({("quantile@0.9", "flag")}), False),  # interpolated between 0s and 1s: n and the 1s
    (None, False),  # unknown figures tell everything
    (frozenset(), False),
])
def test_which_statistics_tell_no_sizes(tells, silent: bool) -> None:
    assert tells_no_sizes(_population(tells)) is silent
