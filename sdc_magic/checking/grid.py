"""The secondary protection of an unverified table: its displayed rows × columns as one grid.

Split from :mod:`.check` (its unverified path): a table without evidence has no dimensions of
its own, so its displayed grid is protected as a frequency table of counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..config import Rules

#: Margins may be hidden when the pattern needs it (as in tau-Argus); a later output that
#: publishes such a margin is made to hide it too (see record_hidden_margins in sdc_magic/linking/hidden_cells.py).
MARGINS = "hideable"


@dataclass
class Outcome:
    """Secondary protection of one table, mapped onto the displayed cells."""

    secondary: np.ndarray
    intervals: dict[int, tuple[float, float]]
    ok: bool
    method: str | None
    message: str | None
    models: list[dict[str, Any]] = field(default_factory=list)  # per measure: dims and every modelled cell


def protect_grid(values: np.ndarray, integer: np.ndarray, primary: np.ndarray, shape: tuple[int, int], flat: Any,
                  rules: Rules, protect: Any, frame: Any = None, keep: np.ndarray | None = None
                  ) -> Outcome | None:
    """Protection of an unverified table of counts, its displayed rows × columns as dimensions.

    The engine's cells are named by the displayed labels (made unique), so that its
    messages say "D13 / neglect", never "9 / 0"; positions map the result back. ``keep``: the
    cells that are counts of one grid (an untraced aggregate's computed columns, withheld
    anyway, are left out: a running total beside the counts is no margin of them).
    """
    if protect is None:
        return None
    if keep is not None and not keep.all():
        sel = np.flatnonzero(keep)
        if not len(sel):
            return None
        cols = np.unique(flat.col_pos[sel])
        sub = _SubFlat(flat.row_pos[sel], np.searchsorted(cols, flat.col_pos[sel]))
        sub_frame = frame.iloc[:, cols] if isinstance(frame, pd.DataFrame) else frame
        part = protect_grid(values[sel], integer[sel], primary[sel], (shape[0], len(cols)), sub, rules, protect,
                            sub_frame)
        if part is None:
            return None
        secondary = np.zeros(len(values), dtype=bool)
        secondary[sel] = part.secondary
        intervals = {int(sel[i]): iv for i, iv in part.intervals.items()}
        return Outcome(secondary, intervals, part.ok, part.method, part.message)
    row_names = _unique_names(frame.index if frame is not None else range(shape[0]), shape[0])
    col_names = _unique_names(frame.columns if isinstance(frame, pd.DataFrame) else [getattr(frame, "name", "")],
                              shape[1])
    cells = pd.DataFrame({"row": flat.row_pos, "col": flat.col_pos})
    to_row = {name: i for i, name in enumerate(row_names)}
    to_col = {name: j for j, name in enumerate(col_names)}
    cells["value"] = np.where(integer, np.nan_to_num(values), 0.0)
    cells["units"] = cells["value"]
    cells["primary"] = primary
    dims = ["row", "col"] if shape[1] > 1 else ["row"]
    named = cells.assign(row=[row_names[i] for i in flat.row_pos], col=[col_names[j] for j in flat.col_pos])
    result = protect(named, dims=dims, value="value", units="value", rules=rules, primary="primary",
                     margins=MARGINS)
    out = result.cells
    inner = out
    for d in dims:
        inner = inner[inner[d] != "Total"]
    back = {"row": to_row, "col": to_col}
    key = pd.MultiIndex.from_arrays([inner[d].map(back[d]).to_numpy() for d in dims]) if len(dims) > 1 \
        else pd.Index(inner[dims[0]].map(back[dims[0]]).to_numpy())
    want = pd.MultiIndex.from_arrays([cells[d].to_numpy() for d in dims]) if len(dims) > 1 \
        else pd.Index(cells[dims[0]].to_numpy())
    pos = key.get_indexer(want)
    status = inner["status"].to_numpy()
    hidden = np.isin(status[pos], ["primary", "secondary"])
    secondary = hidden & ~primary
    lower = inner["lower"].to_numpy(dtype=float)
    upper = inner["upper"].to_numpy(dtype=float)
    intervals = {int(i): (float(lower[pos[i]]), float(upper[pos[i]])) for i in np.flatnonzero(hidden)
                 if np.isfinite(lower[pos[i]])}
    return Outcome(secondary, intervals, bool(getattr(result, "audit_ok", False)), getattr(result, "method", None),
                   getattr(result, "message", None))


@dataclass
class _SubFlat:
    """The positions of some cells of a flat table (what :func:`_protect_grid` reads of it)."""

    row_pos: np.ndarray
    col_pos: np.ndarray


def _unique_names(labels: Any, n: int) -> list[str]:
    """Displayed labels as text, unique (a repeated one gets " #2", " #3"), never "Total"."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for label in list(labels)[:n]:
        text = " / ".join(map(str, label)) if isinstance(label, tuple) else str(label)
        if text == "Total":
            text = "Total\u200b"
        seen[text] = seen.get(text, 0) + 1
        out.append(text if seen[text] == 1 else f"{text} #{seen[text]}")
    while len(out) < n:
        out.append(f"#{len(out) + 1}")
    return out
