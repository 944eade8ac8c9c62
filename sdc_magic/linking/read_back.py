"""Rows that came from a file this session wrote (:mod:`sdc_magic.capture.read_back`).

A table's rows that start a data set of their own (placed in no earlier universe) are compared
with the frames pandas and polars read from files written during the session: when most of them
are rows of such a frame, they are read as a query's rows (``computed_source``), whose columns
do not make them other people (:meth:`.linker.Linker.unidentified_note`).

Rows are compared by their fingerprints (:func:`.identity.frame_hash`), column by column: a
column of the table's rows is one of the frame's when it has its name, or else when every
distinct value of it is a value of some column of the frame (a column renamed after the read).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd

from ..capture import read_back
from ..evidence import rows as row_limits
from .identity import combine, frame_hash, hashed_columns

#: Share of the rows that must be found among a read frame's rows
FOUND_SHARE = 0.5


def from_a_written_file(hashes: dict[Hashable, np.ndarray], n: int) -> bool:
    """Whether rows of these column fingerprints are mostly rows of a frame read from a file this
    session wrote. Never raises (a frame that cannot be read is skipped)."""
    if n == 0 or not hashes:
        return False
    for record in reversed(read_back.remembered()):
        try:
            if _found_in(record, hashes, n):
                return True
        except Exception:
            continue
    return False


def read_back_frame(frame: pd.DataFrame) -> bool:
    """:func:`from_a_written_file` for a frame's rows (nothing is read when no file was read back)."""
    if not read_back.remembered():
        return False
    return from_a_written_file({c: frame_hash(frame, c) for c in hashed_columns(frame)}, len(frame))


def _found_in(record: read_back.ReadBack, hashes: dict[Hashable, np.ndarray], n: int) -> bool:
    theirs = _fingerprints(record)
    if not theirs:
        return False
    distinct: dict[str, set] = {}
    columns: list[np.ndarray] = []
    mine: list[np.ndarray] = []
    for name, h in hashes.items():
        if str(name).startswith("polars#"):
            return False  # (fingerprinted by polars: not comparable with pandas' fingerprints)
        match = str(name) if str(name) in theirs else None
        if match is None:
            if not distinct:
                distinct.update({c: set(np.unique(t).tolist()) for c, t in theirs.items()})
            values = set(np.unique(h).tolist())
            match = next((c for c, d in distinct.items() if values <= d), None)
        if match is None:
            return False
        columns.append(theirs[match])
        mine.append(h)
    found = np.isin(combine(mine), combine(columns))
    return bool(found.sum() >= FOUND_SHARE * n)


def _fingerprints(record: read_back.ReadBack) -> dict[str, np.ndarray]:
    """The frame's fingerprints per column, worked out once (the frame is then let go)."""
    if record.frame is not None:
        frame = _as_pandas(record.frame)
        if frame is not None:
            record.fingerprints = {str(c): frame_hash(frame, c) for c in frame.columns[:row_limits.MAX_HASHED_COLUMNS]
                                   if frame.columns.is_unique}
        record.frame = None
    return record.fingerprints


def _as_pandas(frame: object) -> pd.DataFrame | None:
    if isinstance(frame, pd.DataFrame):
        return frame
    kind = type(frame).__name__
    if kind == "LazyFrame":
        frame = frame.head(row_limits.MAX_LINKED_ROWS + 1).collect()  # type: ignore[attr-defined]
        if len(frame) > row_limits.MAX_LINKED_ROWS:
            return None
    if type(frame).__name__ == "DataFrame" and hasattr(frame, "to_pandas"):
        return frame.to_pandas()  # type: ignore[attr-defined]
    return None
