"""Protection patterns kept on disk, so that a re-run of a notebook costs an audit, not a search.

Why: the search for secondary cells is the slow part of a display (the seed lesson's
200-cell table: ~5 CPU s, ~1,200 attacker LPs), and Restart & Run All, a headless re-run
or a second notebook making the same table in the same folder asks it again with the same
answer (the search is deterministic: work budgets, seeded single-threaded solvers). The
in-memory cache of :func:`.api.protect` only lasts a kernel.

What is written: for a fingerprint of the cells, every argument of the search and the code
that searches (:func:`code_fingerprint`), the *pattern*: which cells are hidden (their
positions in the table model's order), how the search ended and which requirements it could
not meet. No value and no interval leaves the process. For a table of counts only, the
certificates the search found too (deviations of the hidden cells that agree with everything
published, :data:`MAX_STORED_DEVIATIONS` entries at most): without them the final audit of a
recalled pattern looked for every certificate again, and a re-run of a 25 × 20 × 10 table cost
as much as its first display (2.5 CPU s; issue 21: "re-runs cost nothing"). A count table's
certificate bounds hidden counts, which the linking memory beside it holds exactly already (the
rows of every group); a table of magnitudes stores none (nothing beside it holds its values).

What is trusted: nothing. A stored pattern goes through the same exact final audit as a
fresh one (intervals computed again; each stored certificate checked against the table's
relations and ranges before it counts, the others found again), so a display from the store
has the same status, hidden cells and intervals as one from a search. A pattern that fails
that audit, does not hide every primary, or does not fit the table is dropped and the search
runs (see :func:`.api.protect`). One JSON file per fingerprint, under ``.sdc_magic/patterns``
next to the ledger; the oldest are removed beyond :data:`MAX_PATTERNS`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # (the store is set up at %load_ext: the solvers load with the first table that hides a cell)
    from .audit import Problem
    from .lp import Flow

#: Patterns kept per folder (the least recently used go first).
MAX_PATTERNS = 2000
#: The format of a pattern file (a file of another version is ignored).
SCHEMA = 2
#: Certificates of a count table stored with its pattern: at most this many (cell, deviation) entries.
MAX_STORED_DEVIATIONS = 50_000  # (25 x 20 x 10: 32,224 entries, a 0.4 MB file)

_code: str | None = None


def code_fingerprint() -> str:
    """A hash of the code a search depends on: this package's protection, rules and config.

    A pattern stored by another version (or an edited checkout) is never used: its key differs.
    """
    global _code
    if _code is None:
        digest = hashlib.sha256()
        here = Path(__file__).resolve().parent
        sources = sorted(here.glob("*.py")) + [here.parent / "rules.py", here.parent / "config.py"]
        for path in sources:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        with contextlib.suppress(Exception):
            import highspy

            digest.update(str(getattr(highspy, "__version__", "")).encode())
        digest.update(np.__version__.encode())
        _code = digest.hexdigest()[:16]
    return _code


@dataclass(frozen=True)
class StoredPattern:
    """What a search found, without any value: the hidden positions and how it ended."""

    n_cells: int
    hidden: np.ndarray  # sorted positions of the hidden cells
    method_name: str
    audit_ok: bool
    budget_spent: bool
    unprotectable: list[tuple[int, int]]
    #: a count table's certificates: per certificate, (cells, deviations); empty otherwise
    deviations: tuple[tuple[np.ndarray, np.ndarray], ...] = ()

    def mask(self) -> np.ndarray:
        out = np.zeros(self.n_cells, dtype=bool)
        out[self.hidden] = True
        return out


class PatternStore:
    """Patterns in one folder, one JSON file per fingerprint; every failure to read or write is silent.

    The store is an accelerator: a file it cannot read (missing, damaged, another schema) is
    a miss, a file it cannot write is skipped, and neither ever changes a verdict.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> StoredPattern | None:
        try:
            text = self._path(key).read_text(encoding="utf-8")
            raw = json.loads(text)
            if raw.get("schema") != SCHEMA or raw.get("key") != key:
                return None
            n = int(raw["n_cells"])
            hidden = np.asarray(raw["hidden"], dtype=np.int64)
            if hidden.ndim != 1 or (len(hidden) and (hidden.min() < 0 or hidden.max() >= n)):
                return None
            deviations = tuple((np.asarray(cells, dtype=np.int64), np.asarray(moves, dtype=float))
                               for cells, moves in raw.get("deviations", []))
            found = StoredPattern(n, np.unique(hidden), str(raw["method_name"]), bool(raw["audit_ok"]),
                                  bool(raw["budget_spent"]),
                                  [(int(r), int(s)) for r, s in raw["unprotectable"]], deviations)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        with contextlib.suppress(OSError):
            os.utime(self._path(key))  # recently used: pruned last
        return found

    def put(self, key: str, found: StoredPattern) -> None:
        raw = {"schema": SCHEMA, "key": key, "n_cells": int(found.n_cells),
               "hidden": [int(i) for i in found.hidden], "method_name": found.method_name,
               "audit_ok": bool(found.audit_ok), "budget_spent": bool(found.budget_spent),
               "unprotectable": [[int(r), int(s)] for r, s in found.unprotectable],
               "deviations": [[np.asarray(cells).tolist(), np.asarray(moves).tolist()]
                              for cells, moves in found.deviations]}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            target = self._path(key)
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            partial.write_text(json.dumps(raw), encoding="utf-8")
            os.replace(partial, target)  # a reader sees the old file or the new one, never half
            self._prune()
        except OSError:
            return

    def discard(self, key: str) -> None:
        with contextlib.suppress(OSError):
            self._path(key).unlink()

    def _prune(self) -> None:
        files = list(self.folder.glob("*.json"))
        if len(files) <= MAX_PATTERNS:
            return
        files.sort(key=lambda p: p.stat().st_mtime)
        for path in files[: len(files) - MAX_PATTERNS]:
            with contextlib.suppress(OSError):
                path.unlink()


_store: PatternStore | None = None


def use_store(folder: Path | None) -> None:
    """Keep patterns in ``folder`` from now on (None: in memory only, the default)."""
    global _store
    if folder is None:
        _store = None
    elif _store is None or _store.folder != Path(folder):
        _store = PatternStore(Path(folder))


def current_store() -> PatternStore | None:
    """The store in use, or None."""
    return _store


def certificates_of(pool: list[Flow]) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """A count table's certificates, to store with its pattern (at most :data:`MAX_STORED_DEVIATIONS` entries)."""
    out, entries = [], 0
    for f in pool:
        entries += len(f.idx)
        if entries > MAX_STORED_DEVIATIONS:
            break
        out.append((f.idx, f.val))
    return tuple(out)


def checked_certificates(P: Problem, hidden: np.ndarray, stored: tuple[tuple[np.ndarray, np.ndarray], ...]
                         ) -> list[Flow]:
    """The stored certificates that are certificates of ``hidden`` for this table: cells hidden,
    deviations within each cell's range, every relation kept. A damaged or stale file's are
    dropped; the final audit finds others where they are missing."""
    from .lp import Flow, column_residual

    out = []
    for cells, moves in stored:
        if len(cells) != len(moves) or not len(cells) or cells.min() < 0 or cells.max() >= P.n \
                or not np.all(np.diff(cells) > 0) or not np.isfinite(moves).all() or not hidden[cells].all():
            continue
        if (moves > P.U[cells] * (1 + 1e-7) + 1e-9).any() or (-moves > P.L[cells] * (1 + 1e-7) + 1e-9).any():
            continue
        residual = column_residual(P.Mc, cells, moves)
        if len(residual) and np.abs(residual).max() > 1e-6 * max(1.0, float(np.abs(moves).max())):
            continue
        out.append(Flow(cells, moves))
    return out
