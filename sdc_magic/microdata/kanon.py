"""k-anonymity and distinct l-diversity of a row-level frame over declared quasi-identifiers.

Convention for missing values (and values removed by local suppression): a missing
value in a key **matches any value** of that key, and every such "wildcard match"
counts fully. This is the convention of sdcMicro's frequency counts (``freqCalc``,
default ``alpha = 1``: "A missing value stands for any of the possible categories of
the variable considered"; Templ, Kowarik & Meindl, sdcMicro reference manual), and
the one the HDSS article relies on when it reports 3-anonymity after local
suppression and counts suppressed values as matching in its risk measure.

Consequences worth knowing:

* a record's *class size* ``f_k`` is the number of records (itself included) that
  match it on every key; with wildcards these "classes" overlap, so they are not a
  partition and sizes do not add up to the number of records;
* records whose key values are identical (including where they are missing) always
  have the same ``f_k``; the report's "classes" are these distinct key patterns;
* a record with every key missing matches everything: ``f_k`` = number of records.

Distinct l-diversity of a sensitive column: the number of distinct non-missing
sensitive values among the records matching a record (the same wildcard rule).
The report never shows a sensitive value: only counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ._encode import encode_keys, match_weights, patterns, row_ids, unique_rows

__all__ = ["CONVENTION", "KAnonymityReport", "check_k_anonymity", "class_sizes"]

#: Human-readable statement of the wildcard convention, repeated in reports and certificates.
CONVENTION = (
    "missing or suppressed key values match any value (wildcard), each match counted "
    "fully: sdcMicro freqCalc convention (alpha = 1)"
)


def class_sizes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct key patterns of an encoded frame and their wildcard class sizes.

    Returns ``(classes, inverse, counts, fk)``: the distinct code rows, the class of
    every record, the number of records with exactly that pattern, and ``f_k`` of
    each class (records matching it, itself included).
    """
    classes, inverse, counts = unique_rows(codes)
    fk = match_weights(classes, classes, counts.astype(np.float64))
    return classes, inverse, counts, np.rint(fk).astype(np.int64)


def _distinct_sensitive(classes: np.ndarray, counts: np.ndarray, inverse: np.ndarray,
                        sensitive: pd.Series) -> np.ndarray:
    """Per class, the number of distinct sensitive values among matching records."""
    s_codes, _ = pd.factorize(sensitive.reset_index(drop=True), use_na_sentinel=True)
    keep = s_codes >= 0
    n_s = int(s_codes.max()) + 1 if keep.any() else 0
    if n_s == 0:
        return np.zeros(len(classes), dtype=np.int64)
    # distinct (class, sensitive value) pairs present in the data
    pair = np.unique(inverse[keep].astype(np.int64) * n_s + s_codes[keep])
    pair_class, pair_s = pair // n_s, pair % n_s
    result_pairs: list[np.ndarray] = []
    tpat, tinv = patterns(classes)
    for p in range(len(tpat)):
        t_idx = np.flatnonzero(tinv == p)
        for q in range(len(tpat)):
            q_classes = np.flatnonzero(tinv == q)
            sel = np.isin(pair_class, q_classes)
            if not sel.any():
                continue
            src_class, src_s = pair_class[sel], pair_s[sel]
            observed = np.flatnonzero(~(tpat[p] | tpat[q]))
            both = np.concatenate([classes[np.ix_(t_idx, observed)], classes[np.ix_(src_class, observed)]])
            ids, _ = row_ids(both)
            t_ids, s_ids = ids[:len(t_idx)], ids[len(t_idx):]
            left = pd.DataFrame({"pid": t_ids, "cls": t_idx})
            right = pd.DataFrame({"pid": s_ids, "s": src_s}).drop_duplicates()
            merged = left.merge(right, on="pid", how="inner")
            result_pairs.append(merged["cls"].to_numpy(np.int64) * n_s + merged["s"].to_numpy(np.int64))
    if not result_pairs:
        return np.zeros(len(classes), dtype=np.int64)
    distinct = np.unique(np.concatenate(result_pairs))
    return np.bincount(distinct // n_s, minlength=len(classes)).astype(np.int64)


@dataclass(frozen=True, repr=False)
class KAnonymityReport:
    """Result of :func:`check_k_anonymity`. Its repr shows the summary only.

    Per-record arrays are aligned with the checked frame's rows. ``to_frame`` shows
    the key values and class sizes of the violating records, never sensitive values.
    """

    keys: tuple[str, ...]
    k: int
    l: int | None  # noqa: E741 - the standard name of the parameter
    sensitive: str | None
    n_records: int
    class_size: np.ndarray  # f_k of every record
    distinct_sensitive: np.ndarray | None  # per record, when a sensitive column is given
    index: pd.Index
    key_values: pd.DataFrame = field(repr=False)
    class_id: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_classes: int = 0

    @property
    def violating(self) -> np.ndarray:
        """Records whose class has fewer than ``k`` records."""
        return self.class_size < self.k

    @property
    def l_violating(self) -> np.ndarray:
        """Records whose class has fewer than ``l`` distinct sensitive values."""
        if self.l is None or self.distinct_sensitive is None:
            return np.zeros(self.n_records, dtype=bool)
        return self.distinct_sensitive < self.l

    @property
    def n_violations(self) -> int:
        return int(self.violating.sum())

    @property
    def ok(self) -> bool:
        """k-anonymity (and l-diversity when asked) holds for every record."""
        return not (self.violating.any() or self.l_violating.any())

    def classes(self) -> pd.DataFrame:
        """Distinct key patterns with their class size and number of records, smallest first."""
        records = np.bincount(self.class_id, minlength=self.n_classes)
        first = np.full(self.n_classes, -1, dtype=np.int64)
        first[self.class_id[::-1]] = np.arange(self.n_records - 1, -1, -1)
        out = self.key_values.iloc[first].reset_index(drop=True)
        out["class_size"] = self.class_size[first]
        out["records"] = records
        if self.distinct_sensitive is not None:
            out["distinct_sensitive"] = self.distinct_sensitive[first]
        return out.sort_values(["class_size", "records"], kind="stable").reset_index(drop=True)

    def smallest_classes(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` smallest classes (key values, class size, records in the pattern)."""
        return self.classes().head(n)

    def to_frame(self) -> pd.DataFrame:
        """Violating records (k or l): their key values, class size, distinct sensitive count."""
        bad = self.violating | self.l_violating
        frame = self.key_values.loc[bad].copy()
        frame["class_size"] = self.class_size[bad]
        if self.distinct_sensitive is not None:
            frame["distinct_sensitive"] = self.distinct_sensitive[bad]
        return frame

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: what the check asked, and how many records break it."""
        sizes = np.sort(np.unique(self.class_size))[:5].tolist()
        out: dict[str, Any] = {
            "k": self.k,
            "keys": list(self.keys),
            "n_records": self.n_records,
            "n_classes": self.n_classes,
            "violations": self.n_violations,
            "violating_share": round(self.n_violations / self.n_records, 6) if self.n_records else 0.0,
            "smallest_class_sizes": [int(s) for s in sizes],
            "k_anonymous": not bool(self.violating.any()),
            "convention": CONVENTION,
        }
        if self.sensitive is not None:
            out["sensitive"] = self.sensitive
            out["l"] = self.l
            out["l_violations"] = int(self.l_violating.sum())
            out["l_diverse"] = not bool(self.l_violating.any())
        return out

    def __repr__(self) -> str:
        s = self.summary()
        extra = f", l={s['l']}, l_violations={s['l_violations']}" if "l" in s else ""
        return (f"KAnonymityReport(k={s['k']}, keys={s['keys']}, records={s['n_records']}, "
                f"violations={s['violations']}{extra})")


def check_k_anonymity(df: pd.DataFrame, keys: Sequence[str], k: int = 3,
                      sensitive: str | None = None, l: int | None = None) -> KAnonymityReport:  # noqa: E741
    """Check k-anonymity (and distinct l-diversity of ``sensitive``) over ``keys``.

    Missing values in keys are wildcards (see the module docstring). The input frame
    is not modified. ``l`` defaults to 2 when a sensitive column is given.
    """
    keys = tuple(keys)
    if k < 1:
        raise ValueError("k must be at least 1")
    if not keys:
        raise ValueError("at least one key (quasi-identifier) is needed")
    if sensitive is not None and l is None:
        l = 2  # noqa: E741
    (codes,) = encode_keys([df], keys)
    classes, inverse, counts, fk = class_sizes(codes)
    per_record = fk[inverse]
    distinct = None
    if sensitive is not None:
        if sensitive in keys:
            raise ValueError("the sensitive column cannot also be a key")
        distinct = _distinct_sensitive(classes, counts, inverse, df[sensitive])[inverse]
    return KAnonymityReport(
        keys=keys, k=int(k), l=l, sensitive=sensitive, n_records=len(df), class_size=per_record,
        distinct_sensitive=distinct, index=df.index, key_values=df[list(keys)].copy(),
        class_id=inverse, n_classes=len(classes),
    )
