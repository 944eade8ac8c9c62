"""The linking memories of the folder's other notebooks: read, never written.

Why (red team 53b, finding 11): a notebook the server names keeps its own ledger and linking
memory (``.sdc_magic/<notebook>.jsonl.linking.npz``). Two notebooks of one folder over the same
data were never compared: A showed the counts by sex (37/36), B the same people outside district
C (35/35), both ``pass``, both exported, and together they told C's 2 women and 1 man. Both
exports go to the same output checker, from the same project.

Each kernel now reads the other notebooks' memories of its folder (:class:`Siblings`): their
universes join the placement of its tables as universes of earlier outputs would, their
populations named ``<notebook>: <output>`` and marked ``foreign``. A universe one of its tables
is placed in, or one merged into such a universe (:func:`.universes.merge_overlapping`), becomes
its own; its foreign populations are never written to its own memory (that notebook's file holds
them). A memory that changed since it was read (the other kernel showed more) is read again
before the next table: the populations read from it before are let go first.

What a verdict depends on: the other notebooks' outputs *saved* when this table is checked. A
large memory (more than ``Linker.SYNC_SAVE_BYTES``) is saved by a background thread, so a table
checked at the same moment as another notebook's output may not see it yet; run in order, the
same notebooks get the same verdicts.
"""

from __future__ import annotations

from pathlib import Path

from . import persistence
from .universes import Universe

#: the file name of a notebook's linking memory ends so (``<stem>.jsonl.linking.npz``)
SUFFIX = ".linking.npz"


class Siblings:
    """The other notebooks' linking memories of one folder, as last read."""

    def __init__(self) -> None:
        #: per memory file, the modification stamp it was read at
        self.stamps: dict[Path, int] = {}
        #: per notebook, its universes not yet taken into this kernel's (see :meth:`take`)
        self.pending: dict[str, list[Universe]] = {}
        self.notes: list[str] = []

    def refresh(self, own: Path | None, universes: list[Universe]) -> None:
        """Read again every other memory of ``own``'s folder that changed since it was read; the
        populations read from it before are first let go from ``universes`` (this kernel's)."""
        if own is None:
            return
        try:
            paths = sorted(p for p in own.parent.glob(f"*{SUFFIX}") if p != own)
        except OSError:
            return
        for path in paths:
            try:
                stamp = path.stat().st_mtime_ns
            except OSError:
                continue
            if self.stamps.get(path) == stamp:
                continue
            self.stamps[path] = stamp
            name = notebook_of(path)
            for u in universes:
                u.populations = [p for p in u.populations if p.foreign != name]
            try:
                loaded = persistence.load(path)
            except Exception as exc:  # another kernel's file half written, or of another version
                self.notes.append(f"the linking memory of notebook {name!r} could not be read ({type(exc).__name__}): "
                                  "tables are not compared with its outputs")
                self.pending.pop(name, None)
                continue
            kept = []
            for u in loaded:
                if getattr(u, "in_engine", False) or not u.populations:
                    continue  # (an engine's rows are another kernel's connection's)
                for p in u.populations:
                    p.out_id = f"{name}: {p.out_id}"
                    p.foreign = name
                kept.append(u)
            self.pending[name] = kept

    def waiting(self) -> list[Universe]:
        """The universes read and not yet taken into this kernel's."""
        return [u for us in self.pending.values() for u in us]

    def take(self, u: Universe) -> None:
        """``u`` is this kernel's now (a table was placed in it, or it was merged into one)."""
        for name, us in self.pending.items():
            self.pending[name] = [x for x in us if x is not u]


def notebook_of(path: Path) -> str:
    """The notebook a linking memory belongs to (``A.jsonl.linking.npz`` → ``A``)."""
    name = path.name[:-len(SUFFIX)] if path.name.endswith(SUFFIX) else path.name
    return name[:-len(".jsonl")] if name.endswith(".jsonl") else name
