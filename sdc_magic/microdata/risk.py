"""Re-identification risk of noisy event dates: distance-based matching (the HDSS article's measure).

The attack simulated (worst case, the attacker holds the full original data): for each
original person and event type, the attacker looks in the anonymised data for people
that could be them -- same sex, same final education, same final occupation (a value
suppressed by local suppression, or missing, matches anything), with the event's year
within ±1 year of the true year -- and takes the 3 nearest by distance between the
event dates. The person is *at risk* when their own anonymised record is among those
3 nearest. Ties are resolved in the attacker's favour: the true record counts as among
the ``n`` nearest when fewer than ``n`` other candidates are *strictly* closer.

Why it is fast: the article's naive version took 8 days on 32 cores for 4 noise levels.
Here, for each pair of missingness patterns of the blocking keys (a handful), the
anonymised records are sorted once by (block, date); the year window ``[Jan 1 of y-1,
Dec 31 of y+1]`` is a contiguous date interval, so "how many candidates are strictly
closer than the true record" is two binary searches per person (a sorted-window
join). No pairwise distances, no per-person Python loop: O(n log n) per event type.
``match_risk_bruteforce`` is a literal O(n²) reference used in the tests only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ._encode import NA_CODE, encode_keys, patterns, row_ids

__all__ = ["DEFAULT_BLOCK", "DEFAULT_EVENTS", "RiskReport", "match_risk", "match_risk_bruteforce"]

DEFAULT_BLOCK = ("sex", "education_last", "occupation_last")
DEFAULT_EVENTS: dict[str, str] = {
    "birth": "date_birth",
    "death": "date_death",
    "in_migration": "date_in_migration",
    "out_migration": "date_out_migration",
}


@dataclass(frozen=True, repr=False)
class RiskReport:
    """Share of people whose true record is among the ``n_neighbours`` nearest, per event type."""

    per_event: dict[str, dict[str, Any]]
    n_neighbours: int
    year_window: int
    block: tuple[str, ...]
    at_risk: dict[str, pd.Series] = field(repr=False)  # per event: person -> bool

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame.from_dict(self.per_event, orient="index")[["people", "at_risk", "percent"]]

    def summary(self) -> dict[str, Any]:
        return {
            "method": (f"distance-based matching: true record among the {self.n_neighbours} nearest "
                       f"(ties favour the attacker), exact blocking on {list(self.block)} with missing values "
                       f"matching anything, event year within ±{self.year_window}"),
            "n_neighbours": self.n_neighbours,
            "year_window": self.year_window,
            "block": list(self.block),
            "per_event": {k: dict(v) for k, v in self.per_event.items()},
        }

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v['percent']}%" for k, v in self.per_event.items())
        return f"RiskReport({parts})"


def _days(values: pd.Series) -> np.ndarray:
    return pd.to_datetime(values).to_numpy().astype("datetime64[D]").astype(np.int64)


def _year_bounds(days: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    years = days.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64)  # years since 1970
    lo = (years - window).astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
    hi = (years + window + 1).astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64) - 1
    return lo, hi


def _closer_counts(qc: np.ndarray, qday: np.ndarray, lo: np.ndarray, hi: np.ndarray, radius: np.ndarray,
                   ac: np.ndarray, aday: np.ndarray) -> np.ndarray:
    """Per query, anonymised records that match its block and lie strictly within ``radius`` days and the window."""
    counts = np.zeros(len(qday), dtype=np.int64)
    if len(qday) == 0 or len(aday) == 0:
        return counts
    base = min(int(aday.min()), int(lo.min())) - 1
    width = max(int(aday.max()), int(hi.max())) - base + 2
    qpat, qinv = patterns(qc)
    apat, ainv = patterns(ac)
    for p in range(len(qpat)):
        qi = np.flatnonzero(qinv == p)
        left = np.maximum(qday[qi] - radius[qi] + 1, lo[qi]) - base
        right = np.minimum(qday[qi] + radius[qi] - 1, hi[qi]) - base
        empty = left > right
        for q in range(len(apat)):
            ai = np.flatnonzero(ainv == q)
            cols = np.flatnonzero(~(qpat[p] | apat[q]))
            both = np.concatenate([qc[np.ix_(qi, cols)], ac[np.ix_(ai, cols)]])
            ids, _ = row_ids(both)
            q_ids, a_ids = ids[:len(qi)], ids[len(qi):]
            keys = np.sort(a_ids * width + (aday[ai] - base))
            lo_pos = np.searchsorted(keys, q_ids * width + left, side="left")
            hi_pos = np.searchsorted(keys, q_ids * width + right, side="right")
            counts[qi] += np.where(empty, 0, hi_pos - lo_pos)
    return counts


def _prepare(original: pd.DataFrame, anonymised: pd.DataFrame, person: str, col: str, block: tuple[str, ...]):
    q = original.loc[original[col].notna()]
    a = anonymised.loc[anonymised[col].notna()]
    if a[person].duplicated().any() or q[person].duplicated().any():
        raise ValueError(f"{person!r} must identify one row per person in both tables")
    return q, a


def match_risk(original_people: pd.DataFrame, anonymised_people: pd.DataFrame, person: str = "person_id",
               block: Sequence[str] = DEFAULT_BLOCK, events: Mapping[str, str] | None = None,
               n_neighbours: int = 3, year_window: int = 1) -> RiskReport:
    """Distance-based re-identification risk per event type (see the module docstring).

    Both tables have one row per person (e.g. from :func:`person_table`), the same
    ``person`` ids (the evaluator's link, never published), the ``block`` columns, and
    one date column per event type (``events`` maps event type -> column; a missing
    date means the person has no such event). Returns a :class:`RiskReport`.
    """
    block = tuple(block)
    events = dict(DEFAULT_EVENTS if events is None else events)
    per_event: dict[str, dict[str, Any]] = {}
    flags: dict[str, pd.Series] = {}
    for name, col in events.items():
        q, a = _prepare(original_people, anonymised_people, person, col, block)
        qc, ac = encode_keys([q, a], block)
        qday, aday = _days(q[col]), _days(a[col])
        lo, hi = _year_bounds(qday, year_window)
        true_pos = pd.Index(a[person]).get_indexer(q[person])
        has_true = true_pos >= 0
        tp = np.where(has_true, true_pos, 0)
        tday = aday[tp] if len(aday) else np.zeros(len(qday), dtype=np.int64)
        tcodes = ac[tp] if len(aday) else np.full_like(qc, NA_CODE)
        same_block = np.all((qc == tcodes) | (qc == NA_CODE) | (tcodes == NA_CODE), axis=1)
        valid = has_true & same_block & (tday >= lo) & (tday <= hi)
        radius = np.abs(tday - qday)
        closer = _closer_counts(qc, qday, lo, hi, radius, ac, aday)
        risk = valid & (closer < n_neighbours)
        people = len(q)
        per_event[name] = {
            "people": int(people),
            "at_risk": int(risk.sum()),
            "percent": round(100.0 * float(risk.sum()) / people, 2) if people else 0.0,
        }
        flags[name] = pd.Series(risk, index=pd.Index(q[person].to_numpy(), name=person), name=f"at_risk_{name}")
    return RiskReport(per_event=per_event, n_neighbours=int(n_neighbours), year_window=int(year_window),
                      block=block, at_risk=flags)


def match_risk_bruteforce(original_people: pd.DataFrame, anonymised_people: pd.DataFrame,
                          person: str = "person_id", block: Sequence[str] = DEFAULT_BLOCK,
                          events: Mapping[str, str] | None = None, n_neighbours: int = 3,
                          year_window: int = 1) -> dict[str, set[Any]]:
    """Reference for the tests: every original person against every anonymised one, in Python.

    Returns, per event type, the set of person ids at risk. Quadratic: small data only.
    """
    block = tuple(block)
    events = dict(DEFAULT_EVENTS if events is None else events)
    result: dict[str, set[Any]] = {}
    for name, col in events.items():
        q, a = _prepare(original_people, anonymised_people, person, col, block)
        anon = [(row[person], pd.Timestamp(row[col]), [row[b] for b in block]) for _, row in a.iterrows()]
        at_risk: set[Any] = set()
        for _, row in q.iterrows():
            when = pd.Timestamp(row[col])
            keys = [row[b] for b in block]
            candidates = []
            for pid, other_when, other_keys in anon:
                if not all(pd.isna(x) or pd.isna(y) or x == y for x, y in zip(keys, other_keys, strict=True)):
                    continue
                if abs(other_when.year - when.year) > year_window:
                    continue
                distance = abs((other_when.normalize() - when.normalize()).days)
                candidates.append((distance, pid))
            truth = [d for d, pid in candidates if pid == row[person]]
            if not truth:
                continue
            strictly_closer = sum(1 for d, pid in candidates if d < truth[0] and pid != row[person])
            if strictly_closer < n_neighbours:
                at_risk.add(row[person])
        result[name] = at_risk
    return result
