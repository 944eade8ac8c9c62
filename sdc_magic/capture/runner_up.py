"""The two largest contributions per group without a per-group sort (engine-neutral).

Why: the rules need the largest contribution ``x1`` of every group and, for p % and (2, k)
dominance, the runner-up ``x2``. A per-group ``top_k`` is a sort inside every group: in polars it
cost 0.6–0.9 s of 10M rows, against 0.1 s for the user's own sum (a lazy sum displayed at 14×
plain). ``max(|x|)`` and ``Σx²`` cost what a sum costs, and they bound the runner-up: with S the
sum of the squares of the others and R their (absolute) sum, ``x2 ∈ [S / R, min(√S, x1, R)]``,
exact for one or two contributors. Where a rule that reads x2 passes at the upper end (so at
x2 too) the upper end is kept, unused; the other groups (the cells such a rule fails, or might,
and those with negative contributions) get their exact runner-up from the engine, one more
query over those groups only. Spark (``capture/spark.py``) and polars
(``capture/polars/evidence.py``) use it; the facts carry ``top1_<i>`` and ``sq_<i>`` columns,
and :func:`set_tops` writes the ``top`` lists :func:`.contract.group_evidence_from_facts` reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .contract import PREFIX, fact_names


def top1_name(i: int) -> str:
    return f"{PREFIX}top1_{i}"


def squares_name(i: int) -> str:
    return f"{PREFIX}sq_{i}"


def _num(facts: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(facts[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def bounds(facts: pd.DataFrame, i: int, rules: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x1, the upper end of x2, the groups that need their exact x2) of variable i.

    A group needs it when it has negative contributions, or when a rule that reads x2 (p %,
    (n ≥ 2) dominance, one or two units making the whole total) decides differently at the two
    ends, or fails at both: a failing p % cell's protection level is ``p/100·x1 − (T − x1 − x2)``
    (:mod:`sdc_magic.protect.levels`), and the upper end would ask for more protection than
    pandas, which sorts every group, asks for.
    """
    names = fact_names(i)
    x1, sq, tabs, total = (_num(facts, top1_name(i)), _num(facts, squares_name(i)), _num(facts, names["ta"]),
                           _num(facts, names["t"]))
    neg = facts[names["neg"]].fillna(False).to_numpy(dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        rest_sq = np.maximum(np.nan_to_num(sq) - np.nan_to_num(x1) ** 2, 0.0)
        rest = np.maximum(np.nan_to_num(tabs) - np.nan_to_num(x1), 0.0)
        lo = np.where(rest > 0, rest_sq / rest, 0.0)
        hi = np.minimum(np.minimum(np.sqrt(rest_sq), np.nan_to_num(x1)), rest)
        # float sums: the bounds are widened by their rounding error (relative to x1)
        slack = 1e-6 * np.nan_to_num(x1)
        lo, hi = np.maximum(lo - slack, 0.0), np.minimum(hi + slack, np.minimum(np.nan_to_num(x1), rest))
        hi = np.maximum(hi, lo)
    denom = np.where(neg, np.nan_to_num(tabs), np.abs(np.nan_to_num(total)))
    with np.errstate(invalid="ignore", divide="ignore"):
        # the "one or two units make the whole total" rule reads x1 + x2 against the total
        unsure = x1 + hi >= denom * (1 - 1e-9)
        if rules.p is not None:
            limit = rules.p / 100.0 * x1
            unsure |= (denom - x1 - hi < limit)  # fails at the upper end: undecided, or failing
        if rules.dominance is not None and rules.dominance[0] >= 2:
            share = rules.dominance[1] / 100.0
            unsure |= (x1 + hi) / denom > share
    # a group with negative contributions: the protection re-assesses its cells against their net
    # totals (``protect/api.py`` ``_primaries``), not the absolute ones the bounds were judged on
    # (red team: insee tables of negatives hid one cell more than pandas)
    unsure |= neg
    unsure &= np.isfinite(x1) & (hi > lo)
    return x1, hi, unsure


def set_tops(facts: pd.DataFrame, i: int, x1: np.ndarray, second: np.ndarray) -> None:
    """Write variable i's ``top`` lists [x1, x2] (NaN where the group has no value)."""
    top1 = np.where(np.isfinite(x1), x1, np.nan)
    second = np.where(np.isfinite(x1), second, np.nan)
    facts[fact_names(i)["top"]] = [[a, b] for a, b in zip(top1.tolist(), second.tolist(), strict=True)]
