"""What a published output shows, read from its plain text: its status and its rows of cells.

Not a test module (no ``test_`` prefix): the test files of stop 51 import it.
"""

from __future__ import annotations

from typing import Any

X = "✕"  # a hidden cell as drawn


def status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def body(out: Any) -> str:
    """The drawn table, without the status line and notes."""
    return out.data["text/plain"].split("sdc_magic:")[0]


def rows(out: Any) -> dict[str, list[str]]:
    """``{first word of a line: the words after it}`` for every line of the drawn table."""
    found = {}
    for line in body(out).splitlines():
        words = line.split()
        if len(words) >= 2:
            found[words[0]] = words[1:]
    return found


def value(out: Any, label: str) -> float | None:
    """The first cell of the row ``label`` as a number (None when hidden)."""
    cell = rows(out)[label][0]
    return None if cell == X else float(cell.replace(",", ""))


def cleared(*outs: Any) -> bool:
    return all(status(o) in ("pass", "suppressed") for o in outs)
