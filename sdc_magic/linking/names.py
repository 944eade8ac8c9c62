"""How linking names cells and outputs in its explanations, and in which order outputs came.

Every explanation linking gives (a differencing hit, a joint-audit failure) names the cells
by their labels and the outputs by their ids, so an analyst can find them in the notebook.
"""

from __future__ import annotations

import re
from typing import Any

#: a number standing on its own in a label ("C (n=3)", "C: 3", "3 people in C", "C #3"): not a part
#: of a word, a date, a range or a time ("v1", "2024-03", "0-4", "10:30" stay as they are)
_NUMBER_IN_LABEL = re.compile(r"(?<![\w.,])(?<!\d[-/:])\d+(?:[.,]\d+)?(?![\w]|[.,]\d|[-/:]\d)")


def cell_name(labels: tuple) -> str:
    """A cell as the analyst sees it: its labels joined (``North / F``); ``all rows`` for a total."""
    return " / ".join(_label(v) for v in labels) if labels else "all rows"


def _label(v: Any) -> str:
    """One label; a number written into a text label is drawn as the hidden marker (explanations
    name hidden cells: "C (n=3)" or "C: 3" would state what the table hides, as "B (n=30)" beside C;
    "Team ✕" in an explanation costs less than a count shown)."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, str):
        return _NUMBER_IN_LABEL.sub("✕", v)
    return str(v)


def join_names(names: list[str], limit: int = 3) -> str:
    """Names joined with ``+`` (duplicates once), the rest counted, so a message stays one line."""
    names = list(dict.fromkeys(names))
    if len(names) > limit:
        return " + ".join(names[:limit]) + f" + {len(names) - limit} more"
    return " + ".join(names)


def output_order(out_id: str) -> tuple[int, str]:
    """Sort key of an output id (``out-12`` after ``out-9``): the oldest outputs go first. Another
    notebook's output (``A2: out-3``, :mod:`.siblings`) is ordered by its own id."""
    digits = "".join(ch for ch in out_id.rsplit(": ", 1)[-1] if ch.isdigit())
    return (int(digits) if digits else -1, out_id)
