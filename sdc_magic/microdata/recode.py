"""Global recoding proposals: coarser keys, each with the number of k-anonymity violations it leaves.

Why proposals and not an automatic choice: global recoding changes what every user of
the file can analyse (a date becomes a year, a year a 5- or 10-year band, rare
categories merge into "Other"). The analyst picks; we show the effect of each option
on k-anonymity (violations counted with the wildcard convention of :mod:`.kanon`)
so that local suppression afterwards has little left to do -- the article's order:
global recoding first, then local suppression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .kanon import check_k_anonymity

__all__ = ["RecodeProposal", "apply_recodes", "proposals_frame", "recode_proposals"]

OTHER = "Other"


@dataclass(frozen=True, repr=False)
class RecodeProposal:
    """One global recoding of one key and its effect on k-anonymity."""

    key: str
    method: str  # "year" | "band" | "merge_rare"
    params: dict[str, Any]
    description: str
    categories_before: int
    categories_after: int
    violations_before: int
    violations_after: int
    recode: Callable[[pd.Series], pd.Series] = field(repr=False)

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        """A copy of ``df`` with this key recoded."""
        out = df.copy()
        out[self.key] = self.recode(df[self.key])
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "method": self.method, "params": dict(self.params),
            "description": self.description, "categories_before": self.categories_before,
            "categories_after": self.categories_after, "violations_before": self.violations_before,
            "violations_after": self.violations_after,
        }

    def __repr__(self) -> str:
        return f"RecodeProposal({self.description}: violations {self.violations_before} -> {self.violations_after})"


def _to_year(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s).dt.year.astype("Int64")


def _band(width: int) -> Callable[[pd.Series], pd.Series]:
    def recode(s: pd.Series) -> pd.Series:
        start = np.floor(pd.to_numeric(s).astype("float64").to_numpy() / width) * width
        labels = [None if np.isnan(v) else f"{int(v)}-{int(v) + width - 1}" for v in start]
        return pd.Series(labels, index=s.index, dtype=object, name=s.name)

    return recode


def _merge(rare: frozenset[Any]) -> Callable[[pd.Series], pd.Series]:
    def recode(s: pd.Series) -> pd.Series:
        out = s.astype(object)
        return out.where(~out.isin(rare), OTHER)

    return recode


def _is_year_like(s: pd.Series) -> bool:
    if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return False
    vals = pd.to_numeric(s.dropna())
    return len(vals) > 0 and bool((vals == np.floor(vals)).all()) and vals.nunique() > 10


def recode_proposals(df: pd.DataFrame, keys: Sequence[str], k: int = 3,
                     rare_thresholds: Sequence[int] | None = None) -> list[RecodeProposal]:
    """Candidate global recodings of each key, with violations after applying each one alone.

    Dates -> year; integer keys with more than 10 values (years, ages) -> bands of 5
    and of 10; categorical keys -> categories with fewer than ``m`` records merged
    into "Other" (``m`` in ``rare_thresholds``, default ``k``, ``2k`` and ``5k``).
    Nothing is applied: use :meth:`RecodeProposal.apply` or :func:`apply_recodes`.
    """
    keys = list(keys)
    base = check_k_anonymity(df, keys, k).n_violations
    thresholds = sorted(set(rare_thresholds or (k, 2 * k, 5 * k)))
    found: list[tuple[str, str, dict[str, Any], str, Callable[[pd.Series], pd.Series]]] = []
    for key in keys:
        s = df[key]
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            found.append((key, "year", {}, f"{key}: date -> year", _to_year))
        elif _is_year_like(s):
            for width in (5, 10):
                found.append((key, "band", {"width": width}, f"{key}: bands of {width}", _band(width)))
        else:
            counts = s.value_counts(dropna=True)
            seen: set[frozenset[Any]] = set()
            for m in thresholds:
                rare = frozenset(counts.index[counts < m])
                if len(rare) < 1 or rare in seen or len(rare) == len(counts):
                    continue
                seen.add(rare)
                found.append((key, "merge_rare", {"min_records": m, "merged": len(rare)},
                              f"{key}: {len(rare)} categories with fewer than {m} records -> {OTHER!r}",
                              _merge(rare)))
    proposals = []
    for key, method, params, text, fn in found:
        recoded = df.copy()
        recoded[key] = fn(df[key])
        after = check_k_anonymity(recoded, keys, k).n_violations
        proposals.append(RecodeProposal(
            key=key, method=method, params=params, description=text,
            categories_before=int(df[key].nunique(dropna=True)),
            categories_after=int(recoded[key].nunique(dropna=True)),
            violations_before=base, violations_after=after, recode=fn,
        ))
    return proposals


def apply_recodes(df: pd.DataFrame, proposals: Sequence[RecodeProposal]) -> pd.DataFrame:
    """A copy of ``df`` with the chosen proposals applied (at most one per key)."""
    keys = [p.key for p in proposals]
    if len(keys) != len(set(keys)):
        raise ValueError("choose at most one recoding per key")
    out = df.copy()
    for p in proposals:
        out[p.key] = p.recode(df[p.key])
    return out


def proposals_frame(proposals: Sequence[RecodeProposal]) -> pd.DataFrame:
    """The proposals as a table (one row each), fewest violations first."""
    rows = [p.as_dict() for p in proposals]
    frame = pd.DataFrame(rows, columns=["key", "method", "description", "categories_before",
                                        "categories_after", "violations_before", "violations_after"])
    return frame.sort_values("violations_after", kind="stable").reset_index(drop=True)
