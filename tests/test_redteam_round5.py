"""Red team, round 5: the joint audit of small *shared groups of rows* (finest common cells and
their unions, at most 400 of them within 2 s, the 8 newest related outputs) and the merging of
universes, attacked with combinations of outputs; and honest sessions with two data sets.

Data: the 73 people of ``test_engines_redteam`` (district C: two women, persons 70 / 71, incomes
18.02 / 17.19, and one man, 72, income 18.05), the referrals (1,850 cases) and, in sections 4-5,
an unrelated household survey (900 rows, RangeIndex) sharing the column admin2 with them.
Humanitarian preset: threshold 5.

Fixed the same day (kept as regression tests): every finding that came from matching rows of
an unrelated data set by rank (frames of mostly repeated rows are no longer matched by content:
``linking.universes.MIN_RANKED_ROWS``): the second data set losing its own differencing, filling the
window, diluting past 400 groups, and the survey differenced against the referrals.

A test marked ``xfail(strict=True, reason="leak: ...")`` shows a leak: its assertion fails exactly
on the recovered small figure with every output involved cleared (``pass`` / ``suppressed``);
each has a passing twin without the trick (the attack stopped).

Leaks found:

* **A second data set is placed onto the first by (shared column, rank).** ``Universe.locate``
  matches a frame by content on the shared non-key columns *with the rank of each value*: the
  k-th household of the survey in Gonaives "is" the k-th referral case in Gonaives (the 73
  people: the k-th row of district A of any frame with a district column). So unrelated tables
  join the universe (1,850 + 51 rows), and a *filtered* survey frame, ranked again inside the
  filter, "is" other cases than the same households in the whole survey. Consequences:
  - its own differencing is lost: water truck / latrine 43 - 39 = 4 single-person households,
    both 'pass' (alone: suppressed);
  - the related outputs it adds fill the window of eight: sex totals, 7 tables of another
    frame, A or C, B or C: 22 + 17 - 37 = 2 women, 21 + 16 - 36 = 1 man; income sums
    311.88 + 237.97 - 531.80 = 18.05 (person 72); referrals 90+ Family separation
    260 - 186 - 51 - 22 = 1;
  - its crossing with the first data set's tables makes > 400 small common groups: Child
    protection women 18-29 277 - 269 - 6 = 2; forty alternating honest tables: one survey
    table loses its suppression.
* **Rank identities in one data set.** A frame of three columns that tell nobody apart
  (district, sex, flag), filtered by age from the full frame and re-indexed: its rows are
  placed by (district, flag, rank), i.e. on other people (row 5 of the filter -> person 2, not
  6): F 19 + 19 - 37 = 1, M 27 + 10 - 36 = 1 (the two people over 100), all 'pass'. The same
  in the most natural polars form, ``p.filter(age ...).select(district, sex, flag)``.
* **Dilution past 400 small groups, one data set.** Tables that cross the keys of the attack
  make the small common groups too many; the shared-group audit is skipped with a note: four
  ordinary subgroup tables (consent / accepted / no disability / served by admin2 x sex x age
  band), two detailed tables, three 10-cell tables or one table of 100 id suffixes, then 90+ by
  admin2 or category: Gonaives 234 - 166 - 51 - 16 = 1, Family separation 1, all 'pass'.
* **Eight pads of the same frame.** Everyone by income >= 10 .. 17 between the sex totals and
  the filters: the man stays hidden, the women 22 + 17 - 37 = 2 are shown.

Over-protection found: the same rank merge makes an unrelated survey's table difference a
referrals table: the first 750 cases by admin2 (every cell >= 28) lose two cells against the
survey's households by admin2 (Cap-Haitien 139 - 136 = 3).

Stopped: six unrelated tables; unrelated tables by sex; eight age pads; the three filters
through ``pd.concat``, ``set_index``, sorted / shuffled copies (with a new RangeIndex); hidden
margins of ``margins=True`` crosstabs.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"
CLEARED = ("pass", "suppressed")
AC, BC = ["A", "C"], ["B", "C"]


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def _shown(out):
    return protected_frame(out.checked)


def _hidden(out) -> int:
    return int((np.asarray(_shown(out).astype(str)) == X).sum())


def _cell(out, label):
    v = _shown(out)[label]
    return None if str(v) == X else float(v)


def _cleared(*outs) -> bool:
    return all(_status(o) in CLEARED for o in outs)


# ====================================================================== 1. the window
def _pads_between(sess: Session, df: pd.DataFrame, kind: str, n: int) -> tuple[list, dict]:
    rng = np.random.default_rng(1)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 500), "income": rng.uniform(0, 40, 500),
                          "district": rng.choice(["A", "B", "C"], 500)})
    everyone = sess.publish(df.groupby("sex").size())
    for i in range(n):
        if kind == "other frame":
            sess.publish(other.groupby(other.income >= 10 + i).size())
        elif kind == "other frame by sex":
            sess.publish(other[other.income >= 10 + i].groupby("sex").size())
        elif kind == "income":
            sess.publish(df.groupby(df.income >= 10 + i).size())
        elif kind == "age":
            sess.publish(df.groupby(df.age >= 20 + 5 * i).size())
    ac = sess.publish(df[df.district.isin(AC)].groupby("sex").size())
    bc = sess.publish(df[df.district.isin(BC)].groupby("sex").size())
    got = {}
    for k in ("F", "M"):
        parts = [_cell(o, k) for o in (ac, bc, everyone)]
        got[k] = None if None in parts else parts[0] + parts[1] - parts[2]
    return [everyone, ac, bc], got


@pytest.mark.parametrize("n", [7, 10])
def test_leak_unrelated_frames_tables_fill_the_window(sess: Session, df: pd.DataFrame, n: int) -> None:
    outs, got = _pads_between(sess, df, "other frame", n)
    assert not (_cleared(*outs) and got == {"F": 2, "M": 1})


LEAK_TEN_PADS = pytest.mark.xfail(strict=True, reason=(
    "leak: everyone by income >= 10..19 (ten pads) in between: F 22 + 17 - 37 = 2 women in C, man hidden, "
    "'pass'/'suppressed'"))


# Eight pads: stopped since the joint audit asks a small group's upper bound to reach the threshold
# (issue 23.13): bounds of [0; 4] proved C's women few.
@pytest.mark.parametrize("n", [8, pytest.param(10, marks=LEAK_TEN_PADS)])
def test_leak_eight_income_pads_free_the_women(sess: Session, df: pd.DataFrame, n: int) -> None:
    outs, got = _pads_between(sess, df, "income", n)
    assert not (_cleared(*outs) and got["F"] == 2)


@pytest.mark.parametrize("kind,n", [("other frame", 6), ("other frame by sex", 10), ("income", 7), ("age", 10)])
def test_stopped_pads_between(sess: Session, df: pd.DataFrame, kind: str, n: int) -> None:
    outs, got = _pads_between(sess, df, kind, n)
    assert got == {"F": None, "M": None} and _status(outs[-1]) in ("suppressed", "blocked")


# ====================================================================== 2. dilution past 400 groups
def _ninety_plus(sess: Session, r: pd.DataFrame, diluter: str | None) -> tuple[list, dict, list]:
    if diluter == "household suffix":
        sess.publish(r.groupby(r.household_id.str[-2:]).size())
    elif diluter == "case suffix":
        sess.publish(r.groupby(r.case_id.str[-2:]).size())
    elif diluter == "two detailed tables":
        sess.publish(r.groupby(["case_category", "age_band", "sex", "consent_to_refer"]).size())
        sess.publish(r.groupby(["admin2", "referral_accepted", "disability_reported"]).size())
    elif diluter == "last digits":
        sess.publish(r.groupby(r.household_id.str[-1]).size())
        sess.publish(r.groupby(r.case_id.str[-1]).size())
        sess.publish(r.groupby(["case_category", "sex"]).size())
    elif diluter == "age":
        sess.publish(r.groupby("age").size())
    bands = [sess.publish(r[(r.age >= lo) & (r.age < lo + 30)].groupby("admin2").size()) for lo in (0, 30, 60)]
    everyone = sess.publish(r.groupby("admin2").size())
    got = {}
    for k in sorted(r.admin2.unique()):
        parts = [_cell(o, k) for o in (*bands, everyone)]
        got[k] = None if None in parts else parts[-1] - sum(parts[:-1])
    return [*bands, everyone], got, everyone.checked.notes


# Was a leak (earlier tables - 100 id suffixes, all >= 5, 'pass'; or two detailed tables,
# 'suppressed'; or three 10-cell tables - made > 400 small common groups, the shared-group audit
# was skipped and Gonaives 234 - 166 - 51 - 16 = 1 aged 90+ was 'pass'). Issue 21: an output whose
# shared groups could not all be audited is 'review' (never cleared), saying what was not audited.
@pytest.mark.parametrize("diluter", ["household suffix", "case suffix", "two detailed tables", "last digits"])
def test_stopped_dilution_past_400_small_groups(sess: Session, referrals: pd.DataFrame, diluter: str) -> None:
    outs, got, notes = _ninety_plus(sess, referrals, diluter)
    truth = referrals[referrals.age >= 90].groupby("admin2").size()
    assert not (_cleared(*outs) and got["Gonaives"] == truth["Gonaives"] == 1), notes
    if got["Gonaives"] is not None:
        assert _status(outs[-1]) == "review" and any("not audited" in n or "not all audited" in n
                                                      for n in notes), notes


@pytest.mark.parametrize("diluter", [None, "age"])
def test_stopped_ninety_plus_without_dilution(sess: Session, referrals: pd.DataFrame, diluter: str | None) -> None:
    outs, got, _ = _ninety_plus(sess, referrals, diluter)
    assert got["Gonaives"] is None and _status(outs[-1]) in ("suppressed", "blocked")


# ====================================================================== 3. honest: two data sets in one session
# The referrals (with a constant country column) and an unrelated survey of 900 people with the
# same column names, a RangeIndex and the same constant column: 32 overlapping age windows by
# admin2 / admin2 x sex, interleaved. Each table's status is what it is in a session of its own
# data set alone.
def _two_sets(which: set, r: pd.DataFrame) -> dict:
    rng = np.random.default_rng(7)
    sv = pd.DataFrame({"admin2": rng.choice(sorted(r.admin2.unique()), 900), "sex": rng.choice(["F", "M"], 900),
                       "age": rng.integers(0, 90, 900), "country": "HT"})
    r2 = r.assign(country="HT")
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    res = {}
    try:
        for lo in range(0, 80, 10):
            for name, d in (("referrals", r2), ("survey", sv)):
                if name not in which:
                    continue
                for kind in ("ge", "lt"):
                    table = (d[d.age >= lo].groupby("admin2").size() if kind == "ge"
                             else d[d.age < lo + 10].groupby(["admin2", "sex"]).size())
                    out = s.publish(table)
                    res[(name, kind, lo)] = (_status(out), _hidden(out))
    finally:
        s.capture.uninstall()
    return res


def test_honest_two_data_sets_do_not_difference_each_other(referrals: pd.DataFrame) -> None:
    """Over-protection, stated: with both data sets the outputs separate more than 400 small
    groups of rows together, which are not audited, so those tables are 'review' (issue 21: never
    cleared beside "not audited"). No table is blocked, none hides a cell it would not hide alone."""
    both = _two_sets({"referrals", "survey"}, referrals)
    alone = {**_two_sets({"referrals"}, referrals), **_two_sets({"survey"}, referrals)}
    for k, (status, _) in both.items():
        assert status == alone[k][0] or status == "review", (k, status, alone[k][0])
    differ = [k for k in both if both[k][1] != alone[k][1]]
    # (measured: referrals age >= 60 and >= 70 hide one cell more alone, < 50 and < 70 differ by
    # one: alone, the joint audit asks each small group's upper bound to reach the threshold,
    # issue 23.13; together the tables are 'review', not audited, never cleared)
    assert len(differ) <= 4, differ
    assert all(abs(both[k][1] - alone[k][1]) <= 1 for k in differ), [(k, both[k], alone[k]) for k in differ]


# ====================================================================== 4. a second data set merged by rank
# An unrelated household survey (900 rows, RangeIndex) sharing one column with the referrals
# (admin2) that no earlier table used as a key. ``Universe.locate`` places it by content: the
# shared non-key column *with the rank of each value* (the k-th Gonaives household = the k-th
# Gonaives case), so every survey row "is" a referral case, and a filtered survey frame,
# ranked again within the filter, "is" other cases than the same households in the whole survey.
def _survey(r: pd.DataFrame) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 900
    return pd.DataFrame({"admin2": rng.choice(sorted(r.admin2.unique()), n),
                         "water": rng.choice(["piped", "well", "river", "truck"], n, p=[.4, .3, .2, .1]),
                         "hh_size": rng.integers(1, 9, n), "latrine": rng.random(n) < .5})


# Survey households by water x latrine (trucked water with a latrine: 43), then households of 2+
# by the same (39): 43 - 39 = 4 single-person households, both 'pass' after one referrals table
# by case category (alone: the second table is suppressed).
@pytest.mark.parametrize("first", [
    "referrals by category", None])
def test_leak_second_data_set_loses_its_own_differencing(sess: Session, referrals: pd.DataFrame,
                                                         first: str | None) -> None:
    sv = _survey(referrals)
    if first:
        sess.publish(referrals.groupby("case_category").size())
    everyone = sess.publish(sv.groupby(["water", "latrine"]).size())
    two_plus = sess.publish(sv[sv.hh_size >= 2].groupby(["water", "latrine"]).size())
    a, b = _cell(everyone, ("truck", True)), _cell(two_plus, ("truck", True))
    got = None if None in (a, b) else a - b
    assert not (_cleared(everyone, two_plus) and got == 4)


# The referrals' own three-way differencing lost the same way: an honest session alternating six
# referrals tables by category x sex (everyone, consent, under 18, women, accepted, 30 and over)
# and six survey tables by water x latrine: with the survey merged in, > 400 small common groups,
# the shared-group audit is skipped and Child protection women aged 18-29 show:
# 277 - 269 - 6 = 2 (alone: 'suppressed').
def _alternating(sess: Session, r: pd.DataFrame, with_survey: bool) -> dict:
    sv = _survey(r)
    outs = {}
    for i in range(6):
        m = [r.age >= 0, r.consent_to_refer, r.age < 18, r.sex == "F", r.referral_accepted, r.age >= 30][i]
        outs[i] = sess.publish(r[m].groupby(["case_category", "sex"]).size())
        if with_survey:
            s = [sv.hh_size >= 1, sv.latrine, sv.hh_size >= 4, sv.hh_size < 6, ~sv.latrine, sv.hh_size >= 2][i]
            sess.publish(sv[s].groupby(["water", "latrine"]).size())
    return outs


@pytest.mark.parametrize("with_survey", [
    True, False])
def test_leak_second_data_set_dilutes_the_joint_audit(sess: Session, referrals: pd.DataFrame,
                                                      with_survey: bool) -> None:
    outs = _alternating(sess, referrals, with_survey)
    key = ("Child protection", "F")
    parts = [_cell(outs[i], key) for i in (0, 2, 5)]
    got = None if None in parts else parts[0] - parts[1] - parts[2]
    assert not (_cleared(outs[0], outs[2], outs[5]) and got == 2)


# The window: eight survey tables (households by water, by size) between the referrals by category
# and the three age bands by category push the total out: 90+ Family separation
# 260 - 186 - 51 - 22 = 1, Psychosocial 464 - 222 - 156 - 83 = 3, all 'pass'.
@pytest.mark.parametrize("pads", [8, 0])
def test_leak_survey_tables_fill_the_referrals_window(sess: Session, referrals: pd.DataFrame, pads: int) -> None:
    r, sv = referrals, _survey(referrals)
    everyone = sess.publish(r.groupby("case_category").size())
    for i in range(pads):
        sess.publish(sv[sv.hh_size >= 1 + i].groupby("water").size())
    bands = [sess.publish(r[(r.age >= lo) & (r.age < lo + 30)].groupby("case_category").size()) for lo in (0, 30, 60)]
    parts = [_cell(o, "Family separation") for o in (everyone, *bands)]
    got = None if None in parts else parts[0] - sum(parts[1:])
    assert not (_cleared(everyone, *bands) and got == 1)


# Forty tables, the referrals and the survey (sharing admin2 and sex) alternating, each data set
# with ten overlapping filters by one key and by two: every table's status and hidden cells are
# what they are in a session of its own data set alone. They are not: the survey's
# "latrine and 2+ people" by water (against "latrine" by water) is suppressed alone (2 cells:
# latrine households of one person per water source), shown whole beside the referrals.
def _forty(sess: Session, r: pd.DataFrame, which: str) -> dict:
    rng = np.random.default_rng(11)
    sv = _survey(r).assign(sex=rng.choice(["F", "M"], 900))
    rm = [r.age >= 0, r.consent_to_refer, r.referral_accepted, r.sex == "F", r.sex == "M", r.age < 18, r.age >= 18,
          ~r.disability_reported, r.days_to_first_service.notna(), r.case_category != "GBV"]
    sm = [sv.hh_size >= 1, sv.latrine, ~sv.latrine, sv.hh_size >= 3, sv.hh_size < 5, sv.sex == "F",
          sv.water != "truck", sv.hh_size >= 5, sv.latrine & (sv.hh_size >= 2), sv.sex == "M"]
    res = {}
    for i in range(10):
        for name, d, keys in (("r", r[rm[i]], ("case_category", ["age_band", "sex"])),
                              ("s", sv[sm[i]], ("water", ["latrine", "sex"]))):
            if name not in which:
                continue
            for j, by in enumerate(keys):
                out = sess.publish(d.groupby(by).size())
                res[f"{name}{i}{'ab'[j]}"] = (_status(out), _hidden(out))
    return res


def test_leak_forty_tables_of_two_data_sets(referrals: pd.DataFrame) -> None:
    got = {}
    for which in ("rs", "r", "s"):
        s = Session(rules=preset("humanitarian"))
        s.capture.install()
        try:
            got[which] = _forty(s, referrals, which)
        finally:
            s.capture.uninstall()
    both, alone = got["rs"], {**got["r"], **got["s"]}
    assert {k: v for k, v in both.items() if v != alone[k]} == {}


# ====================================================================== 5. honest long session, unit declared
# 24 filters of the referrals (flags, sexes, 20-year age windows, category pairs) by admin2, by
# category x sex, by age band: 72 tables with unit=household_id. Measured: 62 pass, 9 suppressed,
# 1 blocked (ages 50-69 by category x sex: 4, 2, 31, 1, 18, 17 - three cells under 5), 37 cells
# hidden, each for threshold / differencing / secondary; about 0.13 CPU s a table (max 0.36);
# the same without the unit.
def test_honest_seventy_two_tables_with_a_unit(referrals: pd.DataFrame) -> None:
    r = referrals
    cats = sorted(r.case_category.unique())
    masks = [r.age >= 0, r.consent_to_refer, r.referral_accepted, r.sex == "F", r.sex == "M", r.age < 18, r.age >= 18,
             ~r.disability_reported, r.days_to_first_service.notna(), r.case_category != "GBV"]
    masks += [(r.age >= lo) & (r.age < lo + 20) for lo in range(0, 80, 10)]
    masks += [r.case_category.isin([a, b]) for i, a in enumerate(cats) for b in cats[i + 1:]]
    s = Session(rules=dataclasses.replace(preset("humanitarian"), unit="household_id"))
    s.capture.install()
    statuses, hidden, cpu, rules = [], 0, [], set()
    try:
        for m in masks:
            for by in (["admin2"], ["case_category", "sex"], ["age_band"]):
                table = r[m].groupby(by).size()
                t0 = time.process_time()
                out = s.publish(table)
                cpu.append(time.process_time() - t0)
                statuses.append(_status(out))
                hidden += _hidden(out)
                rules |= {x.rule for v in out.checked.reasons.values() for x in v}
    finally:
        s.capture.uninstall()
    assert len(statuses) == 72
    assert statuses.count("blocked") <= 1 and statuses.count("pass") >= 60, statuses
    assert hidden <= 40 and rules <= {"threshold", "differencing", "secondary"}, (hidden, rules)
    assert np.mean(cpu) < 0.5 and max(cpu) < 2, (np.mean(cpu), max(cpu))


# ====================================================================== 6. magnitudes through the window
# Income sums by sex of everyone, seven tables of the unrelated 500-row frame, then of A or C and
# B or C: M 311.88 + 237.97 - 531.80 = 18.05 (person 72's income), F 331.85 + 245.83 - 542.47 =
# 35.21 (C's two women: each learns the other's income), all 'pass'. Without the seven: hidden.
@pytest.mark.parametrize("n", [7, 0])
def test_leak_income_of_one_person_through_the_window(sess: Session, df: pd.DataFrame, n: int) -> None:
    rng = np.random.default_rng(1)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 500), "income": rng.uniform(0, 40, 500),
                          "district": rng.choice(["A", "B", "C"], 500)})
    everyone = sess.publish(df.groupby("sex").income.sum())
    for i in range(n):
        sess.publish(other.groupby(other.income >= 10 + i).size())
    ac = sess.publish(df[df.district.isin(AC)].groupby("sex").income.sum())
    bc = sess.publish(df[df.district.isin(BC)].groupby("sex").income.sum())
    parts = [_cell(o, "M") for o in (ac, bc, everyone)]
    got = None if None in parts else parts[0] + parts[1] - parts[2]
    assert not (_cleared(everyone, ac, bc) and got is not None and abs(got - df.income[72]) < 1e-6)


# The most ordinary dilution: everyone by category, then four usual subgroup tables (consent,
# accepted, no disability, served: by admin2 x sex x age band, each suppressed on its own cells),
# then ages 0-29, 30-59, 60-89 by category: > 400 small common groups, the shared-group audit is
# skipped and 90+ by category shows: Family separation 260 - 186 - 51 - 22 = 1, Psychosocial
# 464 - 222 - 156 - 83 = 3, all 'pass'. Without the four tables: hidden.
# (Was a strict xfail leak with the four tables: now the 90+ output is 'review', not cleared.)
@pytest.mark.parametrize("subgroups", [True, False])
def test_stopped_ordinary_subgroup_tables_dilute(sess: Session, referrals: pd.DataFrame, subgroups: bool) -> None:
    r = referrals
    everyone = sess.publish(r.groupby("case_category").size())
    if subgroups:
        for m in (r.consent_to_refer, r.referral_accepted, ~r.disability_reported, r.days_to_first_service.notna()):
            sess.publish(r[m].groupby(["admin2", "sex", "age_band"]).size())
    bands = [sess.publish(r[(r.age >= lo) & (r.age < lo + 30)].groupby("case_category").size()) for lo in (0, 30, 60)]
    parts = [_cell(o, "Family separation") for o in (everyone, *bands)]
    got = None if None in parts else parts[0] - sum(parts[1:])
    assert not (_cleared(everyone, *bands) and got == 1)


# ====================================================================== 7. stopped: copies with a new index
def _copies(form: str, df: pd.DataFrame) -> list:
    size = lambda d: d.groupby("sex").size()  # noqa: E731
    if form == "concat of filters":
        return [size(df), size(pd.concat([df[df.district == "A"], df[df.district == "C"]])),
                size(pd.concat([df[df.district == "C"], df[df.district == "B"]]))]
    if form == "set_index":
        return [size(df), size(df.set_index("income")[lambda d: d.district.isin(AC)]),
                size(df.set_index(["household", "age"])[lambda d: d.district.isin(BC)])]
    if form == "sorted, new RangeIndex":
        return [size(df), size(df.sort_values("income").reset_index(drop=True)[lambda d: d.district.isin(AC)]),
                size(df.sort_values("age", ascending=False).reset_index(drop=True)[lambda d: d.district.isin(BC)])]
    if form == "shuffled total":
        return [size(df.sample(frac=1, random_state=1).reset_index(drop=True)), size(df[df.district.isin(AC)]),
                size(df.sample(frac=1, random_state=5).reset_index(drop=True)[lambda d: d.district.isin(BC)])]
    raise AssertionError(form)


@pytest.mark.parametrize("form", ["concat of filters", "set_index", "sorted, new RangeIndex", "shuffled total"])
def test_stopped_three_filters_through_copies(sess: Session, df: pd.DataFrame, form: str) -> None:
    everyone, ac, bc = (sess.publish(t) for t in _copies(form, df))
    got = {}
    for k in ("F", "M"):
        parts = [_cell(o, k) for o in (ac, bc, everyone)]
        got[k] = None if None in parts else parts[0] + parts[1] - parts[2]
    assert got == {"F": None, "M": None} and _status(bc) in ("suppressed", "blocked")


# Hidden margins: a crosstab of districts A and B by sex and flag with margins, after everyone by
# sex (37 / 36): its margins would give C (2 / 1), and its inner cells sum to them; the table is
# blocked whole, not shown with the margins alone hidden.
def test_stopped_margins_hidden_with_their_cells(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(df.groupby("sex").size())
    d = df[df.district != "C"]
    out = sess.publish(pd.crosstab(d.sex, d.flag, margins=True))
    shown = _shown(out)
    f_row = [str(shown.loc["F", c]) for c in (0, 1)]
    assert X in f_row and str(shown.loc["F", "All"]) == X


# ====================================================================== 8. over-protection from the rank merge
# The referrals by category, then the survey by water and by admin2 (its 139 Cap-Haitien
# households become the first 139 Cap-Haitien cases), then the first 750 cases registered
# (case_id up to C0750) by admin2 - every cell >= 28: two cells hidden (Cap-Haitien 136 is
# "differenced" against the survey's 139, Mirebalais as its secondary). Alone: 'pass'.
@pytest.mark.parametrize("with_survey", [True, False])
def test_overprotection_unrelated_survey_differences_the_referrals(sess: Session, referrals: pd.DataFrame,
                                                                  with_survey: bool) -> None:
    r, sv = referrals, _survey(referrals)
    sess.publish(r.groupby("case_category").size())
    if with_survey:
        sess.publish(sv.groupby("water").size())
        sess.publish(sv.groupby("admin2").size())
    out = sess.publish(r[r.case_id <= "C0750"].groupby("admin2").size())
    assert _status(out) == "pass" and _hidden(out) == 0, out.checked.reasons


# ====================================================================== 9. rank identities in one data set
# The analyst keeps three columns (district, sex, flag: no column tells people apart) and filters
# them by age from the full frame: under 60 or over 100, and 60 and over, the first (or both)
# with a new RangeIndex. Placed by (district, flag, rank), the filtered rows "were" other people,
# and F 19 + 19 - 37 = 1 (person 6, aged 102), M 27 + 10 - 36 = 1 (person 5, aged 101), all
# 'pass'. With the labels kept: suppressed. Fixed (issue 23.13): a frame re-indexed by
# reset_index is placed by the labels its rows had (``evidence/row_origins.py``).
@pytest.mark.parametrize("form", ["labels", "reset one", "reset both"])
def test_leak_rank_identities_of_a_column_subset(sess: Session, df: pd.DataFrame, form: str) -> None:
    d = df[["district", "sex", "flag"]]
    young_or_old, old = (df.age < 60) | (df.age > 100), df.age >= 60
    everyone = sess.publish(d.groupby("sex").size())
    x1 = d[young_or_old] if form == "labels" else d[young_or_old].reset_index(drop=True)
    x2 = d[old].reset_index(drop=True) if form == "reset both" else d[old]
    a, b = sess.publish(x1.groupby("sex").size()), sess.publish(x2.groupby("sex").size())
    got = {}
    for k in ("F", "M"):
        parts = [_cell(o, k) for o in (a, b, everyone)]
        got[k] = None if None in parts else parts[0] + parts[1] - parts[2]
    assert not (_cleared(everyone, a, b) and got == {"F": 1, "M": 1})


# The natural polars form of the same: filter by age, then select the three columns needed.
# Polars frames carry no labels, so they were placed by content alone: F 19 + 19 - 37 = 1,
# M 27 + 10 - 36 = 1, all 'pass'. (Without the select: suppressed.) Fixed (issue 23.13): the rows of
# a filter or select are labelled by their positions in the frame they came from
# (``capture/polars/origins.py``).
@pytest.mark.parametrize("select", [True, False])
def test_leak_rank_identities_polars_select(sess: Session, p, select: bool) -> None:
    pl = pytest.importorskip("polars")
    cols = ["district", "sex", "flag"] if select else p.columns
    age = pl.col("age")
    outs = [sess.publish(q.select(cols).group_by("sex").len().sort("sex"))
            for q in (p, p.filter((age < 60) | (age > 100)), p.filter(age >= 60))]
    shown = [dict(zip(*(_shown(o)[c].tolist() for c in ("sex", "len")), strict=True)) for o in outs]
    got = {}
    for k in ("F", "M"):
        parts = [s[k] for s in shown]
        got[k] = None if X in map(str, parts) else float(parts[1]) + float(parts[2]) - float(parts[0])
    assert not (_cleared(*outs) and got == {"F": 1, "M": 1})
