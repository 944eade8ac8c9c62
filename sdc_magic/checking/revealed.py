"""What the session's selections by value have told about hidden cells, output after output.

Why (issue 23, red team): a one-sided selection of a table (``t[t > 1]``: C ✕ is kept, so C is
more than 1) is shown, as a sort by value is: alone it bounds a hidden cell on one side only.
A second one-sided selection of the same table from the other side (``t[t < 3]``: C ✕ kept
again) pins it as ``t[t == 2]`` would, and both were cleared. The check remembers, per hidden
cell of a count table (by its labels and value, whichever table showed it), which sides the
outputs shown so far told (:class:`~.lineage.Told`), and withholds the selection that would
complete a pin.

Kept in memory for the kernel's life, bounded (the oldest cells go first); a restarted
kernel starts empty (known gap, docs/known-gaps.md).
"""

from __future__ import annotations

from collections import OrderedDict

#: cells remembered at most (a cell key, its labels and value, is ~100-200 bytes: ~40 MB at most);
#: beyond, the oldest go (red team: 101 outputs of 200 told cells each pushed the first out)
MAX_CELLS = 200_000

Cell = tuple[str, str]


class RevealedSides:
    """Per hidden cell of a count table (its labels and value, :func:`.lineage.cell_key`), the sides
    earlier outputs told."""

    def __init__(self, max_cells: int = MAX_CELLS) -> None:
        self.max_cells = max_cells
        self._sides: OrderedDict[Cell, frozenset[str]] = OrderedDict()

    def __call__(self, cell: Cell) -> frozenset[str]:
        return self._sides.get(cell, frozenset())

    def __len__(self) -> int:
        return len(self._sides)

    def remember(self, sides: dict[Cell, frozenset[str]]) -> None:
        for cell, told in sides.items():
            self._sides[cell] = self._sides.pop(cell, frozenset()) | told
        while len(self._sides) > self.max_cells:
            self._sides.popitem(last=False)

    def clear(self) -> None:
        self._sides.clear()
