"""Local suppression to reach k-anonymity with few suppressed values.

Why greedy and how: finding the minimum number of suppressions is NP-hard, so, like
sdcMicro's ``localSuppression`` (Templ, Kowarik & Meindl), we suppress greedily while
honouring a variable importance order. Our greedy rule (reimplemented from the
description, not from any code):

1. Classes are the distinct key patterns; their sizes ``f_k`` use the wildcard
   convention of :mod:`.kanon` (a suppressed value matches anything).
2. A *candidate* is "suppress key j in every record of violating class u". Its score
   is the number of violating classes it fixes: u itself when the new pattern matches
   at least k records, plus every other violating class v that the new pattern now
   matches (v gains u's records) and that reaches k that way.
3. Candidates are ranked (``order="fixes"``, the default) by score (more first), then by cost (records in u: fewer
   suppressed values first), then by importance (the least important key first), then
   by the growth of u's class size. A round accepts candidates in that order, one per
   class, skipping any that could interact with an already accepted one (same values on
   all keys but the suppressed one); the classes are then recomputed. If no candidate
   fixes anything in a round, each violating class suppresses its best key, which
   always makes progress: a record whose keys are all suppressed matches everything.
4. The result is re-checked with :func:`check_k_anonymity`; the report carries that
   re-check, and an error is raised if it ever failed.

Importance follows sdcMicro: ``importance`` ranks 1..n, 1 = most important (suppressed
only if needed), n = suppressed first. By default keys with more distinct values are
less important (sdcMicro's documented default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ._encode import NA_CODE, encode_keys, match_weights, row_ids
from .kanon import CONVENTION, check_k_anonymity, class_sizes

__all__ = ["SuppressionReport", "local_suppression", "suppress_cells"]


@dataclass(frozen=True, repr=False)
class SuppressionReport:
    """What :func:`local_suppression` did: per variable counts and %, as the paper's table."""

    keys: tuple[str, ...]
    k: int
    importance: dict[str, int]
    n_records: int
    suppressed: dict[str, int]
    rounds: int
    order: str
    violations_before: int
    violations_after: int
    mask: pd.DataFrame = field(repr=False)  # True where a value was suppressed

    @property
    def total(self) -> int:
        return int(sum(self.suppressed.values()))

    @property
    def percent(self) -> dict[str, float]:
        """Suppressions per variable in % of records (the paper reports e.g. 465 = 0.64 %)."""
        n = max(self.n_records, 1)
        return {key: round(100.0 * c / n, 2) for key, c in self.suppressed.items()}

    def to_frame(self) -> pd.DataFrame:
        """Two rows (``suppressions``, ``percent``), one column per key plus ``total``."""
        cols = list(self.keys)
        frame = pd.DataFrame(
            [[self.suppressed[c] for c in cols], [self.percent[c] for c in cols]],
            index=pd.Index(["suppressions", "percent"]), columns=cols,
        )
        frame["total"] = [self.total, round(100.0 * self.total / max(self.n_records, 1), 2)]
        return frame

    def summary(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "keys": list(self.keys),
            "importance": dict(self.importance),
            "n_records": self.n_records,
            "suppressions": dict(self.suppressed),
            "suppressions_percent": self.percent,
            "total_suppressions": self.total,
            "rounds": self.rounds,
            "order": self.order,
            "violations_before": self.violations_before,
            "violations_after": self.violations_after,
            "k_anonymous": self.violations_after == 0,
            "convention": CONVENTION,
        }

    def __repr__(self) -> str:
        return (f"SuppressionReport(k={self.k}, total={self.total}, per_key={self.suppressed}, "
                f"violations {self.violations_before} -> {self.violations_after})")


def _importance(df: pd.DataFrame, keys: tuple[str, ...],
                importance: Mapping[str, int] | Sequence[int] | Sequence[str] | None) -> dict[str, int]:
    """Ranks 1..n per key (1 = most important = suppressed last)."""
    if importance is None:
        distinct = [int(df[key].nunique(dropna=True)) for key in keys]
        # fewer categories -> more important; ties: earlier key more important
        order = sorted(range(len(keys)), key=lambda j: (distinct[j], j))
        return {keys[j]: r + 1 for r, j in enumerate(order)}
    if isinstance(importance, Mapping):
        missing = set(keys) - set(importance)
        if missing:
            raise ValueError(f"importance lacks keys {sorted(missing)}")
        return {key: int(importance[key]) for key in keys}
    items = list(importance)
    if len(items) != len(keys):
        raise ValueError("importance needs one entry per key")
    if all(isinstance(x, str) for x in items):  # names, most important first
        if set(items) != set(keys):
            raise ValueError("importance names must be the keys")
        return {name: r + 1 for r, name in enumerate(items)}
    return {key: int(r) for key, r in zip(keys, items, strict=True)}


def _conflict_groups(classes: np.ndarray) -> np.ndarray:
    """Per class and key j, an id of the class's values on all keys but j."""
    n, width = classes.shape
    groups = np.empty((n, width), dtype=np.int64)
    for j in range(width):
        groups[:, j], _ = row_ids(np.delete(classes, j, axis=1))
    return groups


def _round(classes: np.ndarray, counts: np.ndarray, fk: np.ndarray, k: int,
           priority: np.ndarray, importance_first: bool = False) -> list[tuple[int, int]]:
    """One greedy round: the (class, key) suppressions to apply."""
    viol = np.flatnonzero(fk < k)
    vc = classes[viol]
    cu, cj = np.nonzero(vc != NA_CODE)
    if len(cu) == 0:  # pragma: no cover - a fully suppressed class matches every record
        return []
    u = viol[cu]
    targets = classes[u].copy()
    targets[np.arange(len(u)), cj] = NA_CODE
    fk_new = np.rint(match_weights(targets, classes, counts.astype(np.float64))).astype(np.int64)
    score = (fk_new >= k).astype(np.int64)
    cost = counts[u]
    fk_v = fk[viol]
    for c in np.unique(cost):
        sel = np.flatnonzero(cost == c)
        weights = (fk_v >= k - c).astype(np.float64)  # v reaches k once it gains c records
        gained = match_weights(targets[sel], vc, weights) - match_weights(classes[u[sel]], vc, weights)
        score[sel] += np.rint(gained).astype(np.int64)
    growth = fk_new - fk[u]
    if importance_first:
        order = np.lexsort((cj, u, -growth, cost, -score, -priority[cj]))
    else:
        order = np.lexsort((cj, u, -growth, -priority[cj], cost, -score))

    groups = _conflict_groups(vc)
    width = classes.shape[1]
    accepted: list[tuple[int, int]] = []
    blocked: list[set[int]] = [set() for _ in range(width)]
    handled = np.zeros(len(viol), dtype=bool)
    positive = score[order] > 0
    for phase in (True, False):
        if phase is False and accepted:
            break
        for idx in order[positive == phase]:
            ci = cu[idx]
            if handled[ci]:
                continue
            g = groups[ci]
            if any(g[j] in blocked[j] for j in range(width)):
                continue
            j = int(cj[idx])
            accepted.append((int(viol[ci]), j))
            handled[ci] = True
            blocked[j].add(int(g[j]))
    return accepted


def local_suppression(df: pd.DataFrame, keys: Sequence[str], k: int = 3,
                      importance: Mapping[str, int] | Sequence[int] | Sequence[str] | None = None,
                      order: str = "fixes", max_rounds: int = 100_000) -> tuple[pd.DataFrame, SuppressionReport]:
    """Suppress key values until every record has ``f_k >= k``; returns a new frame and a report.

    The input frame is never modified. Suppressed values become missing (integer
    columns become pandas nullable ``Int64``, booleans ``boolean``). Values already
    missing are wildcards from the start and are not counted as suppressions.

    ``order="fixes"`` (default) ranks candidates by violating classes fixed, then
    cost, then importance; ``order="importance"`` puts importance first (closer to
    sdcMicro's "importance 1 is suppressed only if needed", at the price of more
    suppressions in the less important keys).
    """
    keys = tuple(keys)
    if order not in ("fixes", "importance"):
        raise ValueError("order must be 'fixes' or 'importance'")
    if len(df) < k:
        raise ValueError(f"{len(df)} records cannot be {k}-anonymous")
    ranks = _importance(df, keys, importance)
    priority = np.array([ranks[key] for key in keys], dtype=np.int64)
    (codes,) = encode_keys([df], keys)
    pre_missing = codes == NA_CODE
    before = None
    rounds = 0
    while True:
        classes, inverse, counts, fk = class_sizes(codes)
        if before is None:
            before = int(counts[fk < k].sum())
        if not (fk < k).any():
            break
        if rounds >= max_rounds:
            raise RuntimeError(f"local suppression did not converge in {max_rounds} rounds")
        rounds += 1
        chosen = _round(classes, counts, fk, k, priority, importance_first=order == "importance")
        cls_mask = np.zeros(classes.shape, dtype=bool)
        for u, j in chosen:
            cls_mask[u, j] = True
        codes = np.where(cls_mask[inverse], NA_CODE, codes)
    new = (codes == NA_CODE) & ~pre_missing
    out = suppress_cells(df, pd.DataFrame(new, index=df.index, columns=list(keys)))
    check = check_k_anonymity(out, keys, k)
    if not check.ok:  # pragma: no cover - would be a bug in the greedy bookkeeping
        raise AssertionError("local suppression finished without k-anonymity")
    report = SuppressionReport(
        keys=keys, k=int(k), importance=ranks, n_records=len(df),
        suppressed={key: int(new[:, j].sum()) for j, key in enumerate(keys)},
        rounds=rounds, order=order, violations_before=int(before or 0), violations_after=check.n_violations,
        mask=pd.DataFrame(new, index=df.index, columns=list(keys)),
    )
    return out, report


def suppress_cells(df: pd.DataFrame, mask: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with the cells where ``mask`` is True set to missing.

    Integer and boolean columns are converted to pandas' nullable dtypes so that a
    suppressed value is a real missing value, not a sentinel number.
    """
    out = df.copy()
    for col in mask.columns:
        m = mask[col].to_numpy(dtype=bool)
        if not m.any():
            continue
        series = out[col]
        if pd.api.types.is_bool_dtype(series.dtype) and not isinstance(series.dtype, pd.BooleanDtype):
            series = series.astype("boolean")
        elif pd.api.types.is_integer_dtype(series.dtype) and not isinstance(series.dtype, pd.api.extensions.ExtensionDtype):
            series = series.astype("Int64")
        out[col] = series.mask(pd.Series(m, index=out.index))
    return out
