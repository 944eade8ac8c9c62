"""Synthetic HDSS-like core residency data (one row per event), for tests, demos and benchmarks.

Every row is invented from a seeded generator; no real person stands behind any value.
Why it looks the way it does: the HDSS article's Karonga data has 72,935 people and
280,381 events (about 3.8 events per person) between October 1995 and the end of
2016, with static variables (sex, birth date), core events (baseline, birth,
in-migration, out-migration, death) and time-varying states (education, occupation).
:func:`make_hdss` reproduces that shape (not its values) so that the anonymisation
and risk code runs at the article's scale: ``make_hdss(73_000)`` gives about 280,000
events. A few internal moves are recorded as an out-migration and an in-migration on
the same day, because same-day events are exactly what order-preserving noise must
handle.

Generation is vectorised: the only loop runs over the event rank (1st, 2nd, ...
event of every person at once).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["EDUCATION", "EVENT_KINDS", "OCCUPATION", "make_hdss"]

EVENT_KINDS = ("baseline", "birth", "in_migration", "out_migration", "death")

#: Education levels of the article (ordered).
EDUCATION = ("none", "primary 1-3", "primary 4-7", "primary completed", "JCE", "MSCE", "tertiary")
#: Occupation categories of the article.
OCCUPATION = ("not working", "student", "farmer", "fisherman", "unskilled manual", "skilled manual",
              "small trader", "non-manual", "professional")

_ADULT_JOBS = np.array([2, 3, 4, 5, 6, 7, 0])
_ADULT_P = np.array([0.46, 0.07, 0.13, 0.08, 0.12, 0.05, 0.09])
_EDU_AGE = np.array([0, 6, 9, 13, 15, 17, 20])  # age at which each level can be reached

START = np.datetime64("1995-10-01", "D")
END = np.datetime64("2016-12-31", "D")


def _death_hazard(age: np.ndarray) -> np.ndarray:
    """Yearly death hazard by age (infant peak, flat adult rate, Gompertz old age)."""
    return 0.04 * np.exp(-2.0 * age) + 0.004 + 0.00012 * np.exp(0.085 * age)


def _education(final: np.ndarray, age_years: np.ndarray) -> np.ndarray:
    """Education level reached at an age: the highest level whose age has passed, capped by ``final``."""
    by_age = np.searchsorted(_EDU_AGE, age_years, side="right") - 1
    return np.minimum(final, np.maximum(by_age, 0))


def make_hdss(n_people: int = 2_000, seed: int = 20240611) -> pd.DataFrame:
    """Synthetic event-history data of ``n_people`` people, fixed by ``seed``.

    Columns: ``person_id`` (int), ``sex`` (``F``/``M``), ``birth_date``, ``event``
    (one of :data:`EVENT_KINDS`), ``date``, ``education``, ``occupation`` (the state
    at the event date). Rows are sorted by person, date and event sequence.
    """
    rng = np.random.default_rng(seed)
    n = int(n_people)
    span = int((END - START).astype(np.int64))
    sex = np.where(rng.random(n) < 0.51, "F", "M")
    kind0 = rng.choice(3, size=n, p=[0.44, 0.31, 0.25])  # baseline, birth, in-migration
    first_day = np.where(
        kind0 == 0, rng.integers(0, 400, n),  # baseline census over about a year
        rng.integers(0, span, n),
    ).astype(np.int64)
    age0 = np.where(
        kind0 == 0, np.minimum(rng.exponential(22.0, n), 95.0),
        np.where(kind0 == 1, 0.0, np.clip(rng.gamma(2.2, 9.0, n), 0.0, 80.0)),
    )
    birth_day = first_day - np.rint(age0 * 365.25).astype(np.int64)
    birth_year = 1995 + (birth_day / 365.25)
    # final education: younger cohorts reach higher levels
    cohort = np.clip((birth_year - 1920) / 90.0, 0.0, 1.0)
    final_edu = np.minimum(rng.binomial(6, 0.15 + 0.45 * cohort), 6)
    job = _ADULT_JOBS[rng.choice(len(_ADULT_JOBS), size=n, p=_ADULT_P)]
    job = np.where(final_edu == 6, np.where(rng.random(n) < 0.6, 8, job), job)
    out_rate = np.where(rng.random(n) < 0.4, 0.28, 0.065)  # a mobile third

    rows_person, rows_kind, rows_day = [np.arange(n)], [np.array([0, 1, 2])[kind0]], [first_day]
    rows_job = [job.copy()]
    alive = np.arange(n)
    inside = np.ones(n, dtype=bool)
    day = first_day.copy()
    cur_job = job.copy()
    while len(alive):
        d = day[alive]
        age = (d - birth_day[alive]) / 365.25
        ins = inside[alive]
        h_death = _death_hazard(np.maximum(age, 0))
        young_adult = (age > 15) & (age < 40)
        h_out = out_rate[alive] * np.where(young_adult, 1.6, 0.6)
        h_in = np.full(len(alive), 0.5)
        t_death = rng.exponential(1.0 / h_death) * 365.25
        t_out = rng.exponential(1.0 / h_out) * 365.25
        t_in = rng.exponential(1.0 / h_in) * 365.25
        wait = np.where(ins, np.minimum(t_death, t_out), t_in)
        kind = np.where(ins, np.where(t_death < t_out, 4, 3), 2)
        nd = d + np.maximum(np.rint(wait).astype(np.int64), 1)
        keep = nd <= span
        a, nd, kind = alive[keep], nd[keep], kind[keep]
        # adults change occupation now and then
        change = (rng.random(len(a)) < 0.12)
        new_job = _ADULT_JOBS[rng.choice(len(_ADULT_JOBS), size=len(a), p=_ADULT_P)]
        cur_job[a] = np.where(change, new_job, cur_job[a])
        rows_person.append(a)
        rows_kind.append(kind)
        rows_day.append(nd)
        rows_job.append(cur_job[a].copy())
        # internal move: out and back in on the same day
        same_day = (kind == 3) & (rng.random(len(a)) < 0.04)
        if same_day.any():
            rows_person.append(a[same_day])
            rows_kind.append(np.full(int(same_day.sum()), 2))
            rows_day.append(nd[same_day])
            rows_job.append(cur_job[a[same_day]].copy())
        day[a] = nd
        inside[a] = np.where(kind == 3, same_day, True)
        alive = a[kind != 4]

    person = np.concatenate(rows_person)
    kind = np.concatenate(rows_kind)
    ev_day = np.concatenate(rows_day)
    ev_job = np.concatenate(rows_job)
    seq = np.arange(len(person))
    order = np.lexsort((seq, ev_day, person))
    person, kind, ev_day, ev_job = person[order], kind[order], ev_day[order], ev_job[order]
    age_at = (ev_day - birth_day[person]) / 365.25
    edu = _education(final_edu[person], age_at)
    occ = np.where(age_at < 6, 0, np.where(age_at < 18, np.where(edu >= 1, 1, 0), ev_job))
    kinds = np.array(EVENT_KINDS, dtype=object)
    return pd.DataFrame({
        "person_id": (100_000 + person).astype(np.int64),
        "sex": sex[person].astype(object),
        "birth_date": (START + birth_day[person]).astype("datetime64[s]"),
        "event": kinds[kind],
        "date": (START + ev_day).astype("datetime64[s]"),
        "education": np.array(EDUCATION, dtype=object)[edu],
        "occupation": np.array(OCCUPATION, dtype=object)[occ],
    })
