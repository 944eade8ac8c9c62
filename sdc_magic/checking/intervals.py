"""What an output may state of its hidden cells, once every decision is made (issue 23.13).

Moved out of :mod:`.check` (stop 50) when it grew: the protection computes attacker intervals
assuming every margin known; the record and the display state only what the published cells
allow them to.
"""

from __future__ import annotations

import numpy as np

from .check import Checked

PINNED_NOTE = ("{n} hidden cell(s) that fail a rule are determined exactly by the cells shown (protection "
               "not proven): an output checker decides")


def settle_intervals(checked: Checked) -> Checked:
    """The intervals a record may carry, once every decision is made (issue 23.13).

    Intervals are the attacker's bounds for the *published* pattern. A blocked table publishes
    nothing, so it carries none: the joint audit blocked a table after its protection had
    computed bounds for a pattern never shown, some exact ([57; 57] for a cell hidden later).
    A hidden cell the published cells determine exactly is not protected by hiding it: its
    interval is dropped from the record (which must not state what the table hides); when the
    cell fails a rule itself, the protection is not proven and a cleared table goes to review.
    """
    if checked.status == "blocked" or (checked.hidden.size and checked.hidden.all()) or checked.rounded:
        # (a rounded table: the protection's intervals come from the exact margins, [0; 17] beside a
        # total shown as 35 tells it is 37; its certificate states what the rounded figures allow)
        checked.intervals = {}
        return checked
    pinned: list[tuple[int, int]] = []
    for rc, (lo, hi) in list(checked.intervals.items()):
        r, c = rc
        if not checked.hidden[r, c]:
            del checked.intervals[rc]
            continue
        if np.isfinite(lo) and np.isfinite(hi) and hi - lo <= 1e-9 * max(1.0, abs(lo)):
            del checked.intervals[rc]
            if any(x.rule != "secondary" for x in checked.reasons.get(rc, [])):
                pinned.append(rc)
    pinned_primary = len(_pinned_by_shown_cells(checked, pinned)) if pinned else 0
    if pinned_primary and checked.status in ("pass", "suppressed"):
        checked.status = "review"
        checked.notes.append(PINNED_NOTE.format(n=pinned_primary))
    _state_published_intervals_only(checked)
    return checked


def _pinned_by_shown_cells(checked: Checked, pinned: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The hidden primaries among ``pinned`` (exact in the protection's intervals, which assume
    every margin known) that the displayed cells pin too, in some protection model: a primary
    pinned only by a margin the table does not show (C's flag sum of 0) is not determined by what
    is published. A margin that pins every cell whatever is hidden tells them by itself when it
    is shown later (C's mean flag of 0.0 over 12 people: all of them unflagged, which the rules
    allow; a total of 2 people is that table's own small cell), so the later output is judged by
    its own rules; helper-90 (stop 67) found no count or sum recovered this way."""
    from ..protect.certificate import shown_cells_pin

    positions = checked.entry_positions
    if positions is None or checked.cell_rows is None or checked.cell_cols is None or not checked.models:
        return pinned
    at = np.asarray(positions)
    entry_of = {(int(checked.cell_rows[i]), int(checked.cell_cols[i])): int(at[i]) for i in np.flatnonzero(at >= 0)}
    displayed = set(entry_of.values())
    wanted = {rc: entry_of[rc] for rc in pinned if rc in entry_of}
    if len(wanted) < len(pinned):
        return pinned  # (a cell the mapping does not know: kept as pinned, fail closed)
    still: set[tuple[int, int]] = set()
    seen: set[tuple[int, int]] = set()
    for model in checked.models:
        rows_of = model.get("entry_rows") or {}
        rows = {rows_of[e]: rc for rc, e in wanted.items() if e in rows_of}
        if rows:
            seen |= set(rows.values())
            still |= {rows[k] for k in shown_cells_pin(model, displayed, set(rows))}
    return [rc for rc in pinned if rc in still or rc not in seen]  # (in no model: kept, fail closed)


#: statistics whose cells the protection's intervals bound (a mean's cell is bounded as a sum)
BOUNDED_STATS = frozenset({"count", "size", "sum"})


def _state_published_intervals_only(checked: Checked) -> None:
    """Drop the intervals the record may not state: those of a table whose protection model holds
    margins it does not show, and those of cells that are not counts or sums.

    Why (red team, stop 50): the protection assumes every margin known (a stronger attacker), so
    its intervals follow from margins nobody was shown. "Somewhere between 0 and 17" for B's and
    C's hidden women beside A's 20 told the women's total, 37, on screen, in the HTML, the product's
    mime type, the ledger and the redacted copy; with a later cleared table of everyone outside C
    (35), C's 2 women. On a table of means every hidden mean said "between 0 and 483.8": the bound
    of B's and C's *total* income. The certificate already states what the published cells allow
    (its intervals are recomputed at export, :func:`~sdc_magic.protect.certificate.restated`);
    at display time that costs two LPs per hidden cell, so the display states none."""
    if not checked.intervals:
        return
    from ..protect.certificate import UNPUBLISHED, unpublished_margins

    positions = checked.entry_positions
    displayed = None if positions is None else {int(e) for e in np.asarray(positions) if e >= 0}
    for model in checked.models:
        cells = unpublished_margins(model, displayed)
        if "status" in getattr(cells, "columns", ()) and (cells["status"].to_numpy(dtype=object) == UNPUBLISHED).any():
            checked.intervals = {}
            checked.intervals_withheld = True
            return
    if checked.entry is None or positions is None or checked.cell_rows is None or checked.cell_cols is None:
        return
    stat = np.asarray(checked.entry.evidence.stat).astype(str)
    at = np.asarray(positions)
    for i in np.flatnonzero(at >= 0):
        if stat[at[i]] not in BOUNDED_STATS:
            checked.intervals.pop((int(checked.cell_rows[i]), int(checked.cell_cols[i])), None)
