"""The checking pipeline: resolve → primary rules → secondary protection → a decision.

``check(obj, session)`` is pure with respect to the user's object (it never modifies
it) and returns a :class:`Checked`: which displayed cells are hidden and why, the
audited interval of each hidden cell, and the output's status:

* ``pass``: nothing risky; the table is shown as pandas shows it, with a badge;
* ``suppressed``: risky cells hidden, and the secondary pattern passed the attacker
  audit, so the protected version is exportable;
* ``review``: needs a human (negative contributions, unknown statistic, unverified
  numbers, unit column not found);
* ``blocked``: cannot be made safe here (row-level data, protection failed, checking
  failed): never exportable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import rules as rules_mod
from ..config import Rules
from ..evidence.flatten import MISSING_LABEL, Flat, numeric
from ..evidence.registry import Entry
from ..rules import CellFacts, Reason
from . import nested_keys
from .categories import distinct_counts_units, with_categories_read
from .grid import MARGINS, Outcome, protect_grid
from .labels import (
    captured_categories,
    data_label_sizes,
    label_disclosure,
    mask_numbers,
    mask_text_labels,
    numbers_in_hidden_labels,
    numbers_in_unverified_labels,
    small_group_sizes_as_labels,
)
from .margin_rows import escape_total, with_primary_margins, with_public_cells, without_empty_cells
from .resolve import Resolved, resolve, unwrap
from .row_order import settle_row_order
from .selection import (
    sides_of_engine_filters,
    withhold_if_only_hidden_rows,
    withhold_if_selected_by_values,
    withhold_if_selected_unexplained,
    withhold_pinned_labels,
)
from .values import individual_cells, not_counts, numbers_only, row_windows_hidden, untraced_cells

ADDITIVE_STATS = frozenset({"count", "size", "sum", "mean", "proportion", "percent"})
NOT_PROTECTED_YET = "secondary protection not yet applied"
#: Above this many cells a table with primary cells is not protected interactively: it is
#: blocked with a reason (aggregate up, or run sdc_magic.protect.protect offline).
MAX_PROTECTED_CELLS = 20_000
#: Displayed margins made primary (differencing) go to the search as primary margin rows
#: (checking/margin_rows.py). Off: every displayed margin of a table with one risky margin is
#: primary, and protecting them all hid every margin, which the linking then held against later
#: tables of other statistics over the same rows (a count table after an income rollup: blocked).
#: Until differencing names only the risky margin without leaving unions exact (tried: 4 people
#: recovered as FS 90+ + Psychosocial 90+), such margins stay hidden unprotected and
#: settle_intervals sends a cleared table whose primary margin the shown cells pin to review.
PROTECT_PRIMARY_MARGINS = False


@dataclass
class Checked:
    """The decision for one displayed object."""

    status: str
    kind: str
    frame: pd.DataFrame | pd.Series
    hidden: np.ndarray  # (rows, cols) bool grid over the displayed layout
    reasons: dict[tuple[int, int], list[Reason]] = field(default_factory=dict)
    intervals: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    primary_count: int = 0
    secondary_count: int = 0
    unverified: np.ndarray | None = None  # (rows, cols) bool: numbers we could not verify
    notes: list[str] = field(default_factory=list)
    rules: Rules | None = None
    call: str | None = None
    method: str | None = None
    entry: Any = None  # the captured Entry the table was matched to (source for suggestions)
    models: list[dict[str, Any]] = field(default_factory=list)  # protection models, for certificates
    entry_positions: np.ndarray | None = None  # per displayed flat cell, its cell in the entry (-1: none)
    hidden_flat: np.ndarray | None = None  # per displayed flat cell, hidden or not
    cell_rows: np.ndarray | None = None  # per displayed flat cell, its display row
    cell_cols: np.ndarray | None = None
    microdata_certificate: dict[str, Any] | None = None  # k-anonymity report of a releasable row-level frame
    rounded: int | None = None
    #: the attacker intervals of hidden cells are not stated (:func:`.intervals.settle_intervals`): they
    #: followed from margins the table does not show
    intervals_withheld: bool = False
    #: numeric labels that are the values of fewer than ``threshold`` units: drawn as the hidden
    #: marker wherever they appear (issue 23.5: a household size of 12 beside its ✕)
    #: labels drawn hidden: rare numeric labels, and ("text", label, number) for a small number in a label
    hidden_labels: frozenset[float | tuple[str, str, str]] = frozenset()
    #: what this output's selection by values tells of its parents' hidden cells, one side each
    #: (:class:`~.lineage.Told`); the session remembers it once the output is shown
    told_sides: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    @property
    def hidden_count(self) -> int:
        return int(self.hidden.sum())

    def reason_summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for reasons in self.reasons.values():
            for rule in {r.rule for r in reasons}:
                out[rule] = out.get(rule, 0) + 1
        return out


def check(obj: Any, registry: Any, rules: Rules, protector: Any = None, linker: Any = None,
          progress: Any = None, published: Any = None, reuse: Any = None, revealed: Any = None) -> Checked:
    """Check one displayed object (DataFrame, Series or Styler) under ``rules``.

    ``linker(entry, positions)`` may return extra primary cells (flat index → reasons)
    found against the session's earlier outputs (differencing through filters).
    ``progress(message, fraction)`` is called during long protections.
    ``published(entry, positions)`` may return cells already public through earlier
    outputs ({keys subset: labels}): protection never relies on hiding them.
    ``reuse(entry, positions, frame, notes)`` may return the final decision of the same
    table shown earlier (see :mod:`sdc_magic.jupyter.decisions`), which is then returned as it is.
    ``revealed`` (:class:`~.revealed.RevealedSides`): what the session's earlier selections by
    value told of hidden cells; this output's are added (see :func:`.selection.withhold_pinned_labels`).
    """
    frame, notes = unwrap(obj)
    told: dict[tuple[str, str], frozenset[str]] = {}
    if protector is not False:
        told = withhold_pinned_labels(frame, registry, lambda leaf: _leaf_hidden(leaf, registry, rules, protector),
                                      revealed)
    checked = _decide(frame, notes, registry, rules, protector, linker, progress, published, reuse)
    if protector is not False:
        # (an engine's one-sided filter of an aggregate: polars filter(len < 10), then t[t > 1])
        told = {**told, **sides_of_engine_filters(frame, checked, revealed)}
    checked.told_sides = told
    return checked


def _decide(frame: Any, notes: list[str], registry: Any, rules: Rules, protector: Any, linker: Any, progress: Any,
            published: Any, reuse: Any) -> Checked:
    """The decision for ``frame`` once selections by value are judged (see :func:`check`), its rows
    in an order its published cells explain (:func:`.row_order.settle_row_order`)."""
    resolved = resolve(frame, registry)
    resolved.notes = notes + resolved.notes
    shape = _shape(frame)
    if resolved.kind == "empty":
        return Checked("pass", "empty", frame, np.zeros(shape, bool), notes=resolved.notes + ["empty table"],
                       rules=rules)
    if resolved.kind == "row-level":
        hidden, window_notes = row_windows_hidden(frame, resolved.untraced, shape)
        return Checked("blocked", "row-level", frame, hidden, rules=rules,
                       notes=resolved.notes + ["row-level data: never exportable", *window_notes])
    if resolved.kind == "unverified":
        unverified = _check_unverified(resolved, rules, protector, shape, registry, source=frame)
        withhold_if_selected_by_values(frame, unverified)  # (an outer query's WHERE on an aggregate)
        return settle_row_order(unverified)
    if reuse is not None and resolved.match is not None:
        earlier = reuse(resolved.match.entry, resolved.match.positions, frame, resolved.notes)
        if earlier is not None:
            withhold_if_selected_by_values(frame, earlier)  # (the same cells chosen by their labels first)
            withhold_if_only_hidden_rows(earlier, resolved)
            withhold_if_selected_unexplained(frame, earlier, resolved)
            return earlier  # (its rows in the order settled when it was first shown)
    checked = _check_table(resolved, rules, protector, shape, linker, progress, published)
    withhold_if_selected_by_values(frame, checked)
    withhold_if_only_hidden_rows(checked, resolved)
    withhold_if_selected_unexplained(frame, checked, resolved)
    return settle_row_order(checked)


def _leaf_hidden(leaf: Any, registry: Any, rules: Rules, protector: Any) -> np.ndarray | None:
    """A parent table's hidden cells as it is checked on its own (None when blocked)."""
    checked = check(leaf, registry, rules, protector)
    return None if checked.status == "blocked" else np.asarray(checked.hidden, dtype=bool)


def _shape(frame: pd.DataFrame | pd.Series) -> tuple[int, int]:
    return (len(frame), 1) if isinstance(frame, pd.Series) else frame.shape


def _structural(flat: Flat | None, rules: Rules) -> np.ndarray:
    """Cells declared structurally empty (``"M/Pregnancy"``), whatever the layout.

    A declaration matches a cell when each of its labels is one of the cell's labels, so
    ``unstack`` or ``T`` (which reorder the labels) do not change the answer. Nothing is
    computed when no structural zero is declared.
    """
    assert flat is not None
    if not rules.structural_zeros:
        return np.zeros(len(flat), dtype=bool)
    wanted = [frozenset(p.strip() for p in spec.split("/")) for spec in rules.structural_zeros]
    columns = [flat.dims[n] for n in flat.dims]
    out = np.zeros(len(flat), dtype=bool)
    for i in range(len(flat)):
        parts = {str(c[i]).replace(MISSING_LABEL, "missing").strip() for c in columns}
        out[i] = any(w <= parts for w in wanted)
    return out


def _facts(ev: Any, structural: np.ndarray, entry: Any = None, rules: Rules | None = None) -> CellFacts:
    """The rules' view of captured evidence (one entry per cell)."""
    return CellFacts(stat=ev.stat, units=ev.units, total=ev.total, top=ev.top, negative=ev.negative,
                     total_abs=ev.total_abs, structural=structural, ones=getattr(ev, "ones", None),
                     value=ev.value, counts_units=distinct_counts_units(ev, entry, rules))


def _check_table(resolved: Resolved, rules: Rules, protector: Any, shape: tuple[int, int],
                 linker: Any = None, progress: Any = None, published: Any = None) -> Checked:
    ev = resolved.evidence
    flat = resolved.flat
    entry = resolved.match.entry if resolved.match else None
    assert ev is not None and flat is not None and entry is not None
    facts = _facts(ev, _structural(resolved.flat, rules), entry, rules)
    assessment = rules_mod.assess(facts, rules)
    primary = assessment.primary.copy()
    reasons = {i: list(rs) for i, rs in assessment.reasons.items()}
    notes = list(resolved.notes)
    rules, read = with_categories_read(ev, facts.counts_units, rules)
    if read:
        notes.append(f"distinct counts of {', '.join(map(repr, read))} read as categories, not units (few values "
                     "recurring across the groups): not judged by the threshold; declare unit= or categories= "
                     "to decide otherwise")

    # Statistics Finland row rule over the displayed rows
    if rules.row_threshold is not None and resolved.cell_rows is not None:
        counts = np.isin(ev.stat.astype(str), ["count", "size", "proportion", "percent", "nunique"])
        row_units = np.bincount(resolved.cell_rows[counts & ~ev.is_margin],
                                weights=ev.units[counts & ~ev.is_margin], minlength=shape[0])
        small_rows = (row_units > 0) & (row_units < rules.row_threshold)
        for i in np.flatnonzero(small_rows[resolved.cell_rows] & ~primary):
            primary[i] = True
            reasons.setdefault(int(i), []).append(Reason(
                "row_threshold", f"its row has fewer than {rules.row_threshold} units (row rule)"))

    if linker is not None and resolved.match is not None:
        for i, extra in linker(entry, resolved.match.positions, ev.is_margin).items():
            primary[i] = True
            reasons.setdefault(int(i), []).extend(extra)

    rare_labels: set[float] = set()
    text_labels: set[tuple[str, str, str]] = set()
    label_sizes = data_label_sizes(resolved, ev)
    label_review = label_disclosure(resolved, ev, rules, reasons, notes, rare_labels, text_labels, label_sizes)
    withheld = small_group_sizes_as_labels(entry, flat, ev, rules)
    if withheld is not None:
        from ..capture.contract import Withheld

        raise Withheld(withheld)  # the labels are the secret: nothing of the table is drawn

    hidden = primary.copy()
    status, secondary, intervals, method, models = "pass", np.zeros(len(flat), dtype=bool), {}, None, []
    shares = getattr(entry, "normalized", None) is not None
    infinite = _infinite_cells(flat, ev)
    if infinite.any():
        # an overflow or a division by zero: no rule can judge it and no LP can take it (issue 23.9)
        notes.append(f"{int(infinite.sum())} cell(s) are infinite (an overflow, or a division by zero): they "
                     "cannot be checked or protected; fix the data or the statistic")
        for i in np.flatnonzero(infinite):
            reasons.setdefault(int(i), []).append(INFINITE_REASON)
        label_review = True
    if infinite.any():
        pass  # hidden primaries stay hidden; no secondary protection (status review below)
    elif primary.any() or _primary_left_out(entry, resolved, rules):
        public = published(entry, resolved.match.positions) if published is not None and resolved.match else {}
        for _ in range(SHARE_ROUNDS if shares else 1):
            hidden = primary.copy()
            round_reasons = {i: list(rs) for i, rs in reasons.items()}
            round_notes = list(notes)
            outcome = _protect_entry(entry, resolved, primary, rules, protector, progress, public)
            decided = _apply(outcome, "suppressed", primary, hidden, round_reasons, round_notes)
            picks = _share_singletons(entry, resolved, hidden)[0] if shares and decided[0] != "blocked" else None
            if picks is None or not picks.any():
                break
            # a group of shares with one hidden cell: its smallest other cell becomes primary, and the
            # protection runs again (so that cell gets a real interval and its own secondaries)
            primary = primary | picks
            for i in np.flatnonzero(picks):
                reasons.setdefault(int(i), []).append(SHARE_REASON)
        reasons, notes = round_reasons, round_notes
        status, secondary, intervals, method, models = decided
        if status == "suppressed" and not hidden.any():
            status = "pass"  # the small cells are among those left out, which protect each other
    if shares and hidden.any() and status != "blocked":
        picks, stuck = _share_singletons(entry, resolved, hidden)
        if picks.any() or stuck:  # (rounds spent, or a share alone in its group): not cleared
            hidden |= picks
            for i in np.flatnonzero(picks):
                reasons.setdefault(int(i), []).append(SHARE_REASON)
                intervals.pop(int(i), None)
            notes.append("a hidden share is the only cell shown for its group, so it is 1 by construction: "
                         "show every category (e.g. unstack(fill_value=0)) or merge the small group" if stuck else
                         "some groups of shares still had a single hidden cell after protection: hidden, "
                         "not proven")
            label_review = True
    if assessment.review.any() or label_review or any("not found" in n for n in notes):
        if status == "pass" or status == "suppressed":
            status = "review"
    nonempty = ev.units > 0
    if status != "blocked" and nonempty.sum() > 1 and hidden[nonempty].all():
        status = "blocked"
        notes.append("every cell would be hidden: nothing of this table can be published; aggregate up")
    if rare_labels:  # the protection's notes and reasons name cells by their labels too
        notes = [mask_numbers(n, rare_labels) for n in notes]
        reasons = {i: [Reason(r.rule, mask_numbers(r.message, rare_labels)) for r in rs] for i, rs in reasons.items()}
    beside_hidden = numbers_in_hidden_labels(resolved, ev, hidden, label_sizes) - text_labels
    text_labels |= beside_hidden
    if beside_hidden and status in ("pass", "suppressed"):
        # drawn hidden on screen, but an export would write the labels as they are: not exportable
        # (red team: "B (n=30)" beside B's hidden cell, masked on screen, was in the CSV and certificate)
        status = "review"
        notes.append("a label beside hidden cells states a number (drawn hidden): remove it from the label "
                     "to export this table")
    if text_labels:
        notes = [mask_text_labels(n, text_labels) for n in notes]
        reasons = {i: [Reason(r.rule, mask_text_labels(r.message, text_labels)) for r in rs]
                   for i, rs in reasons.items()}
    checked = _finish(resolved, rules, shape, status, hidden, reasons, intervals, primary, secondary, notes,
                      call=entry.call, method=method)
    checked.entry = entry
    checked.models = models
    checked.hidden_labels = frozenset(rare_labels) | frozenset(text_labels)
    return checked


SHARE_ROUNDS = 4
SHARE_REASON = Reason("shares", "hidden because the shares of its group sum to 1: with one hidden share alone, "
                                "1 minus the others would give it back")


def _share_singletons(entry: Entry, resolved: Resolved, hidden: np.ndarray) -> tuple[np.ndarray, bool]:
    """For a table of shares: the cells to hide so that no group keeps a single hidden share.

    Why (issue 23, red team round 3): ``crosstab(..., normalize="index")`` hid a small group's
    share, but the shares of its row sum to 1, so with the zeros beside it the hidden share is
    1 − 0 − 0: all the cases of that district are female.  The protection reasons on counts,
    whose row totals are not published; a share table publishes every such total (as 1).  With
    two hidden cells or more in a group, each hidden share can be anything from 0 to what the
    published ones leave.  The second cell is the group's smallest (a zero when there is one).
    Returns (cells to hide, True when some hidden share is the only cell of its group).
    """
    flat = resolved.flat
    ev = resolved.evidence
    assert flat is not None and ev is not None
    picks = np.zeros(len(hidden), dtype=bool)
    norm = tuple(entry.normalized or ())
    if not set(norm) <= set(flat.dims):
        return picks, True
    inner = ~np.asarray(ev.is_margin, dtype=bool)
    if norm:
        group = pd.MultiIndex.from_arrays([pd.Index(flat.dims[d], dtype=object) for d in norm]).factorize()[0] \
            if len(norm) > 1 else pd.factorize(pd.Index(flat.dims[norm[0]], dtype=object))[0]
    else:
        group = np.zeros(len(flat), dtype=np.int64)
    group = np.where(inner, group, -1)
    size = np.asarray(ev.units, dtype=float)
    stuck = False
    for g in np.unique(group[hidden & (group >= 0)]):
        members = np.flatnonzero(group == g)
        if int(hidden[members].sum()) != 1:
            continue
        others = members[~hidden[members]]
        if not len(others):
            stuck = True
            continue
        picks[int(others[np.lexsort((others, size[others]))][0])] = True
    return picks, stuck


#: "X (n=3)", "n = 2", "[4]", "(2 people)": a small number written into a label
def _finish(resolved: Resolved, rules: Rules, shape: tuple[int, int], status: str, hidden: np.ndarray,
            reasons: dict[int, list[Reason]], intervals: dict[int, tuple[float, float]], primary: np.ndarray,
            secondary: np.ndarray, notes: list[str], *, call: str | None, method: str | None,
            unverified: np.ndarray | None = None) -> Checked:
    rows = resolved.cell_rows
    cols = resolved.cell_cols
    assert rows is not None and cols is not None
    grid = np.zeros(shape, dtype=bool)
    grid[rows[hidden], cols[hidden]] = True
    grid_reasons = {(int(rows[i]), int(cols[i])): rs for i, rs in reasons.items()}
    grid_intervals = {(int(rows[i]), int(cols[i])): iv for i, iv in intervals.items() if hidden[i]}
    unverified_grid = None
    if unverified is not None:
        unverified_grid = np.zeros(shape, dtype=bool)
        unverified_grid[rows[unverified], cols[unverified]] = True
    return Checked(status=status, kind=resolved.kind, frame=resolved.frame, hidden=grid, reasons=grid_reasons,
                   intervals=grid_intervals, primary_count=int(primary.sum()),
                   secondary_count=int((secondary & ~primary).sum()), unverified=unverified_grid, notes=notes,
                   rules=rules, call=call, method=method, rounded=rules.round_to,
                   entry_positions=resolved.match.positions if resolved.match is not None else None,
                   hidden_flat=hidden.copy(), cell_rows=rows, cell_cols=cols)


def hidden_cells_of_entry(entry: Any, rules: Rules, protector: Any = None) -> np.ndarray:
    """Per cell of a captured entry, hidden or not when the entry is protected on its own, or
    hidden by a display of it (``Entry.displayed_hidden``: red team of stop 67, ``t["All"]`` of a
    crosstab whose margins the joint audit hid showed them); a derived table without evidence
    inherits these, see :mod:`derived`. Fails closed: if checking the entry raises, every cell
    counts as hidden."""
    from ..evidence.registry import Match

    flat = entry.flat
    try:
        frame = pd.DataFrame(np.asarray(entry.values2d, dtype=float).reshape(flat.shape))
        resolved = Resolved("table", frame, flat, match=Match(entry, np.arange(len(flat)), "identity"),
                            evidence=entry.evidence, cell_rows=flat.row_pos, cell_cols=flat.col_pos)
        checked = _check_table(resolved, rules, protector, flat.shape)
        hidden = np.asarray(checked.hidden[flat.row_pos, flat.col_pos], dtype=bool)
    except Exception:  # fail closed: a parent we cannot judge hides all it has
        return np.ones(len(flat), dtype=bool)
    shown_hidden = entry.displayed_hidden
    if shown_hidden is not None and len(shown_hidden) == len(hidden):
        hidden = hidden | shown_hidden  # (what its displays hid beyond its own protection: linking)
    return hidden


def _check_unverified(resolved: Resolved, rules: Rules, protector: Any, shape: tuple[int, int],
                      registry: Any = None, source: Any = None) -> Checked:
    flat = resolved.flat
    assert flat is not None
    resolved.cell_rows = flat.row_pos
    resolved.cell_cols = flat.col_pos
    values = numeric(flat.values)
    if values is None:
        values = numbers_only(flat.values)
    individual = individual_cells(flat.values, values)
    finite = np.isfinite(values)
    integer = finite & (values == np.round(values)) & (values >= 0) & ~not_counts(values, flat.col_pos)
    unverified = finite & ~integer
    derivation = None
    exempt = np.zeros(len(flat), dtype=bool)
    if registry is not None and protector is not False:
        loaded = _load_protector(protector)
        derivation = _dependent_cells(source, resolved, registry, rules, loaded)
        if derivation is not None:
            exempt = derivation[2]
    facts = CellFacts(stat=np.full(len(flat), "count", dtype=object), units=np.where(integer, values, 0),
                      structural=_structural(resolved.flat, rules))
    assessment = rules_mod.assess(facts, rules)
    # a cell recomputed from the published cells of one checked table tells nothing they do
    # not (x.diff(axis=1): 18 - 17 = 1 is no count of one person): not checked as a count
    primary = assessment.primary & integer & ~exempt
    reasons = {i: rs for i, rs in assessment.reasons.items() if primary[i]}
    notes = list(resolved.notes) + ["no evidence for this table: whole numbers were checked as counts"]
    if exempt.any():
        notes.append(f"{int(exempt.sum())} cell(s) are computed from the published cells of one checked table "
                     "only: not checked again as counts")
    hidden = primary.copy()
    status, secondary, intervals, method = "review", np.zeros(len(flat), dtype=bool), {}, None
    computed = untraced_cells(resolved.frame, flat, resolved.untraced, unverified)
    # (the computed cells are withheld below: only the counts among the others need protecting)
    keep = ~exempt if computed is None else ~exempt & ~computed
    if (primary & keep).any():
        outcome = protect_grid(values, integer, primary, shape, flat, rules, _load_protector(protector),
                               resolved.frame, keep=None if keep.all() else keep)
        status, secondary, intervals, method, _ = _apply(outcome, "review", primary, hidden, reasons, notes)
    if registry is not None and protector is not False:
        from .derived import inherit

        inherited = inherit(flat, registry, rules,
                            lambda entry, protect: hidden_cells_of_entry(entry, rules, loaded if protect else False),
                            recorded=_has_recipe(source))
        if inherited is not None:
            # (the recomputation decides the exempt cells exactly: functions of published cells
            # only, with no number from elsewhere, see lineage._one_leaf_cells; one equal to a
            # hidden value by chance, E·M 18 - 17 = 1 beside C·F 1, tells nothing of it)
            by_label = inherited.hidden & ~exempt
            notes.append(inherited.note)
            secondary = _hide(by_label, hidden, secondary, primary, reasons, "derived",
                              f"computed from {inherited.parent_call}, whose cell with these labels is hidden")
        if derivation is not None and derivation[3] is not None and (derivation[3] & ~hidden).any():
            foreign = derivation[3] & ~hidden
            notes.append(f"{int(foreign.sum())} number(s) come from no checked table (a count from the rows joined "
                         "to the table?): withheld, beside its cells they could give a small group or a hidden cell "
                         "back by subtraction. Show them as a table of their own, where they are checked")
            secondary = _hide(foreign, hidden, secondary, primary, reasons, "untraced",
                              "a number from outside the checked tables: withheld")
        if derivation is not None and derivation[0].any():
            mask, note = derivation[0], derivation[1]
            notes.append(note)
            secondary = _hide(mask, hidden, secondary, primary, reasons, "derived",
                              "computed from a hidden cell of the table it is derived from")
    if individual.any():
        # a date, text or list an aggregation produced is some person's value (a first or
        # last date, a name, a list of members): withheld on screen, never drawn
        hidden |= individual
        primary = primary | individual
        notes.append(f"{int(individual.sum())} cell(s) hold dates, text or lists computed from the rows "
                     "(a first or last date, names): individual values, withheld")
        for i in np.flatnonzero(individual):
            reasons.setdefault(int(i), []).append(Reason(
                "individual", "a date, text or list computed from the rows is some person's value"))
        if status != "review":
            status = "review"
    if computed is not None and (computed & ~hidden).any():
        # an aggregate computed in a way no plan traces (a window over groups, a running total, a
        # ratio of aggregates): its computed columns and its numbers that are not counts can give
        # a hidden count back (73 - 72 = 1 from a running total; 40 / 54.8 % = 73 people in all)
        notes.append(f"{int((computed & ~hidden).sum())} cell(s) were computed from the groups' figures in a way "
                     "sdc_magic does not trace (a window, running total, ratio or join of aggregates): withheld. "
                     "Show the aggregate itself, or compute shares and totals in pandas from a checked table")
        secondary = _hide(computed, hidden, secondary, primary, reasons, "untraced",
                          "computed from aggregated figures in a way that is not traced: withheld")
    if unverified.any():
        notes.append("numbers that are not counts could not be verified: this output is not exportable")
        for i in np.flatnonzero(unverified):
            reasons.setdefault(int(i), []).append(Reason(
                "unverified", "no evidence of how this number was computed"))
    # numbers written into its labels: small ones, and any beside hidden cells ("B (n=30)" gives C back)
    hidden_rows = {resolved.frame.index[i] for i in np.unique(flat.row_pos[hidden])}
    hidden_cols = {resolved.frame.columns[j] for j in np.unique(flat.col_pos[hidden])} \
        if isinstance(resolved.frame, pd.DataFrame) else set()
    text_labels = numbers_in_unverified_labels(resolved.frame, hidden_rows, hidden_cols, rules.threshold,
                                               captured_categories(registry))
    if text_labels:
        notes = [mask_text_labels(n, text_labels) for n in notes]
        reasons = {i: [Reason(r.rule, mask_text_labels(r.message, text_labels)) for r in rs]
                   for i, rs in reasons.items()}
    checked = _finish(resolved, rules, shape, status, hidden, reasons, intervals, primary, secondary, notes,
                      call=None, method=method, unverified=unverified)
    checked.hidden_labels = frozenset(text_labels)
    return checked


def _hide(mask: np.ndarray, hidden: np.ndarray, secondary: np.ndarray, primary: np.ndarray,
          reasons: dict[int, list[Reason]], rule: str, text: str) -> np.ndarray:
    """Hide ``mask`` (``hidden`` in place; a reason for each cell not hidden yet); the new secondary mask."""
    for i in np.flatnonzero(mask & ~hidden):
        reasons.setdefault(int(i), []).append(Reason(rule, text))
    hidden |= mask
    return secondary | (mask & ~primary)


def _has_recipe(source: Any) -> bool:
    from ..capture.contract import recipe_of

    return source is not None and recipe_of(source) is not None


def _dependent_cells(source: Any, resolved: Resolved, registry: Any, rules: Rules, protector: Any
                     ) -> tuple[np.ndarray, str, np.ndarray, np.ndarray | None] | None:
    """Per flat cell, whether the derived table ``source`` computes it from a hidden cell of the
    aggregation results it comes from (its recipe, see :mod:`.lineage`), with a note; whether it
    is exactly recomputed from the published cells of one of them; and whether it is a number
    from outside them beside hidden cells (or None); or None."""
    from .lineage import dependence

    def leaf_hidden(leaf: Any) -> np.ndarray | None:
        checked = check(leaf, registry, rules, protector)
        if checked.status == "blocked":
            return None
        hidden = np.asarray(checked.hidden, dtype=bool).copy()
        # ... and what its displays hid beyond that (the joint audit's cells: red team of stop 67)
        shown = None if checked.entry is None else checked.entry.displayed_hidden
        at = checked.entry_positions
        if shown is not None and at is not None and checked.cell_rows is not None and checked.cell_cols is not None:
            at = np.asarray(at)
            idx = np.flatnonzero((at >= 0) & (at < len(shown)))
            idx = idx[shown[at[idx]]]
            hidden[np.asarray(checked.cell_rows)[idx], np.asarray(checked.cell_cols)[idx]] = True
        return hidden

    def describe(leaf: Any) -> str:
        entry = registry.by_object(leaf)
        return entry.call if entry is not None and entry.call else "an aggregation"

    dep = dependence(source, lambda x: registry.by_object(x) is not None, leaf_hidden, describe)
    if dep is None:
        return None
    flat = resolved.flat
    assert flat is not None
    exempt = np.zeros(len(flat), dtype=bool)
    foreign = None
    if dep.hidden.shape == _shape(resolved.frame):
        mask = dep.hidden[flat.row_pos, flat.col_pos]
        if dep.foreign is not None and dep.foreign.shape == dep.hidden.shape:
            foreign = dep.foreign[flat.row_pos, flat.col_pos]
        if dep.exact and dep.one_leaf is not None and dep.one_leaf.shape == dep.hidden.shape:
            # (those of them that move with a hidden cell are hidden below, by the recomputation)
            exempt = dep.one_leaf[flat.row_pos, flat.col_pos]
    else:  # shown in another layout than computed: every cell of a table that depends on anything
        mask = np.full(len(flat), bool(dep.hidden.any()))
    if not mask.any():
        return mask, "", exempt, foreign
    parents = ", ".join(sorted(set(dep.parents))) or "aggregations"
    if dep.exact:
        note = (f"computed from {parents}: {int(mask.sum())} cell(s) change when the cells hidden there change, "
                "and are hidden")
    else:
        note = f"computed from {parents} in a way that could not be recomputed: every cell is hidden"
    return mask, note, exempt, foreign


def _apply(outcome: Outcome | None, status_if_ok: str, primary: np.ndarray, hidden: np.ndarray,
           reasons: dict[int, list[Reason]], notes: list[str]
           ) -> tuple[str, np.ndarray, dict[int, tuple[float, float]], str | None, list[dict[str, Any]]]:
    """Merge a protection outcome into the decision (``hidden``, ``reasons`` and ``notes`` in place).

    No engine: blocked. A pattern that failed its audit: blocked with every cell hidden. A
    search that spent its work budget before proving any pattern: every cell hidden too, but
    ``review`` (issue 21: a budget is not a proof that no pattern exists; a checker decides).
    """
    if outcome is None:
        notes.append(NOT_PROTECTED_YET)
        return "blocked", np.zeros(len(primary), dtype=bool), {}, None, []
    hidden |= outcome.secondary
    status = status_if_ok
    if not outcome.ok:
        from ..protect.api import BUDGET_SPENT_METHOD

        status = "review" if BUDGET_SPENT_METHOD in str(outcome.method or "") else "blocked"
        hidden[:] = True
        notes.append(outcome.message or "no suppression pattern protects every primary cell")
    for i in np.flatnonzero(outcome.secondary & ~primary):
        reasons.setdefault(int(i), []).append(Reason(
            "secondary", "hidden so that the other hidden cells cannot be recovered by subtraction"))
    return status, outcome.secondary, outcome.intervals, outcome.method, outcome.models


# ------------------------------------------------------------------ secondary protection
def _load_protector(protector: Any) -> Any:
    """The protection function: the one given, none (``False``: primary cells only), or ours."""
    if protector is False:
        return None
    if protector is not None:
        return protector
    try:
        from ..protect import protect
    except ImportError:
        return None
    return protect


INFINITE_REASON = Reason("infinite", "an infinite value (an overflow, or a division by zero) cannot be checked")


def _infinite_cells(flat: Flat, ev: Any) -> np.ndarray:
    """Cells whose displayed value or recorded total is infinite."""
    values = numeric(flat.values)
    out = np.isinf(values) if values is not None else np.zeros(len(flat), dtype=bool)
    total = getattr(ev, "total", None)
    if total is not None and len(total) == len(out):
        with np.errstate(invalid="ignore"):
            out |= np.isinf(np.asarray(total, dtype=float))
    return out


def _primary_left_out(entry: Entry, resolved: Resolved, rules: Rules) -> bool:
    """Whether a selection of a captured table leaves out a cell the rules hide.

    Why (red team, round 7): ``t.drop("C")``, ``t[t.index != "C"]``, ``t.head(2)`` showed
    every other district at ``pass``, and the total (a margin the protection assumes known)
    minus them is C. A cell left out of the display is unpublished like a hidden one, and a
    primary left out needs the same protection: :func:`_protect_entry` runs over the whole
    captured table, so the displayed cells that would give it back are hidden too.
    """
    match = resolved.match
    if match is None or match.how == "identity":
        return False
    shown = np.zeros(len(entry.evidence.value), dtype=bool)
    shown[match.positions[match.positions >= 0]] = True
    if shown.all():
        return False
    facts = _facts(entry.evidence, _structural(entry.flat, rules), entry, rules)
    return bool((rules_mod.assess(facts, rules).primary & ~shown).any())


def _protect_entry(entry: Entry, resolved: Resolved, primary_shown: np.ndarray, rules: Rules,
                   protector: Any, progress: Any = None, public: dict | None = None) -> Outcome | None:
    """Secondary suppression over the whole captured table, mapped onto the displayed cells.

    ``public``: per figure (``_figure_of``), the cells earlier outputs published with it.
    """
    assert resolved.match is not None
    ev_all = entry.evidence
    positions = resolved.match.positions
    # primary flags for every cell of the captured table (not only those displayed); the
    # object itself on display already had every cell assessed: no second pass
    if resolved.match.how == "identity":
        primary_all = np.zeros(len(ev_all.value), dtype=bool)
    else:
        facts_all = _facts(ev_all, _structural(entry.flat, rules), entry, rules)
        primary_all = rules_mod.assess(facts_all, rules).primary
    shown = positions >= 0
    primary_all[positions[shown & primary_shown]] = True
    hidden_all = primary_all.copy()
    intervals_all: dict[int, tuple[float, float]] = {}
    ok_all = True
    methods: list[str] = []
    messages: list[str] = []
    models: list[dict[str, Any]] = []
    measure_names, measure_codes = np.unique(entry.flat.measure.astype(str), return_inverse=True)
    order = np.argsort(measure_codes, kind="stable")
    bounds = np.searchsorted(measure_codes[order], np.arange(len(measure_names) + 1))
    protect = None
    for m_index, measure in enumerate(measure_names):
        sel = np.sort(order[bounds[m_index]:bounds[m_index + 1]])
        stats = set(ev_all.stat[sel].astype(str).tolist())
        if not primary_all[sel].any():
            continue
        counts_units = distinct_counts_units(ev_all, entry, rules) if stats == {"nunique"} else None
        distinct_units = stats == {"nunique"} and (counts_units is None or bool(counts_units[sel].all()))
        if not entry.dims or not (stats <= ADDITIVE_STATS or distinct_units):
            continue  # no linear relation links these cells: primary suppression suffices
        nonempty = sel[ev_all.units[sel] > 0]
        if len(nonempty) and primary_all[nonempty].all():
            hidden_all[sel] = True  # every cell is primary: nothing to protect, nothing to publish
            continue
        if len(sel) > MAX_PROTECTED_CELLS:
            ok_all = False
            hidden_all[sel] = True
            messages.append(f"{len(sel):,} cells with small cells among them: too large to protect here "
                            "(aggregate up, or run sdc_magic.protect.protect offline)")
            continue
        protect = protect or _load_protector(protector)
        if protect is None:
            return None
        hidden_sel, iv, ok, method, message, model = _protect_measure(entry, sel, primary_all, rules, protect,
                                                                      progress, public)
        model["measure"] = str(measure)
        models.append(model)
        hidden_all[sel] |= hidden_sel
        for local, interval in iv.items():
            intervals_all[int(sel[local])] = interval
        ok_all &= ok
        if method:
            methods.append(method)
        if message:
            messages.append(message)
    secondary = np.zeros(len(positions), dtype=bool)
    secondary[shown] = hidden_all[positions[shown]] & ~primary_shown[shown]
    intervals = {int(i): intervals_all[int(positions[i])] for i in np.flatnonzero(shown)
                 if int(positions[i]) in intervals_all}
    return Outcome(secondary, intervals, ok_all, ", ".join(sorted(set(methods))) or None,
                   "; ".join(messages) or None, models)


def _protect_measure(entry: Entry, sel: np.ndarray, primary_all: np.ndarray, rules: Rules, protect: Any,
                     progress: Any = None, public: dict | None = None) -> tuple[np.ndarray, dict[int, tuple[float, float]], bool, str | None,
                                                    str | None, dict[str, Any]]:
    ev = entry.evidence
    dims = list(entry.dims)
    margin = ev.is_margin[sel]
    inner = without_empty_cells(_in_label_order(entry, sel[~margin], dims), ev.units, primary_all)
    stat = set(ev.stat[sel].astype(str).tolist())
    if stat <= {"proportion", "percent"}:
        value = ev.units[inner]
    elif stat == {"nunique"}:  # distinct people (households...) per group: a frequency table of them
        value = ev.value[inner]
    elif stat <= {"sum", "mean"}:
        value = ev.total[inner]
    else:
        value = ev.value[inner]
    # internal column names: a dimension may be called "status" or "value" like the engine's own columns
    internal = [f"_dim{i}" for i in range(len(dims))]
    cells = pd.DataFrame({c: escape_total(entry.flat.dims[d][inner]) for c, d in zip(internal, dims, strict=True)})
    cells["value"] = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    cells["units"] = ev.units[inner] if stat != {"nunique"} else cells["value"].to_numpy()
    cells["primary"] = primary_all[inner]
    top_cols = []
    for j in range(ev.top.shape[1]):
        name = f"top{j + 1}"
        cells[name] = np.nan_to_num(ev.top[inner, j], nan=0.0)
        top_cols.append(name)
    ones = getattr(ev, "ones", None)
    indicator = ones is not None and len(inner) > 0 and bool(np.isfinite(ones[inner]).all())
    if indicator:  # sums and means of a 0/1 variable are protected as the counts they are
        cells["units"] = np.nan_to_num(ones[inner], nan=0.0)
    magnitude = bool(stat & {"sum", "mean"}) and not indicator
    # a count table whose values are its units is a frequency table for the engine: a hidden
    # small count's interval must then also reach the threshold (not only ±protection %)
    frequency = not magnitude and bool(np.array_equal(cells["value"].to_numpy(), cells["units"].to_numpy(
        dtype=float)))
    kwargs: dict[str, Any] = {"progress": progress} if progress is not None else {}
    lack_primary = None
    if indicator and frequency:
        lack = ev.units[inner] - cells["value"].to_numpy()
        small_with = (cells["value"] > 0) & (cells["value"] < rules.threshold)
        lack_primary = cells["primary"].to_numpy() & (lack > 0) & (lack < rules.threshold) & ~small_with.to_numpy()
        if not lack_primary.any():
            lack_primary = None
    cells = with_primary_margins(cells, entry, sel[margin & primary_all[sel]], internal, dims, top_cols) \
        if PROTECT_PRIMARY_MARGINS else cells
    public = public or {}
    public_cells = public.get(_figure_of(stat, ev.var[sel[0]] if len(sel) else None)) or public.get(None)
    if public_cells:
        cells = with_public_cells(cells, internal, dims, public_cells, top_cols)
        kwargs["publish"] = "publish"
    with np.errstate(invalid="ignore", divide="ignore"):  # no numpy warnings in researchers' notebooks
        if lack_primary is not None:
            result = _protect_both_sides(protect, cells, internal, ev.units[inner], lack_primary, rules, kwargs)
        else:
            result = _call_protect(protect, cells, internal, top_cols if magnitude else None, rules, kwargs,
                                   frequency=frequency)
    out = result.cells
    return _map_protection(entry, sel, margin, dims, internal, stat, result, out)


def _figure_of(stats: set[str], var: Any) -> tuple[str, str] | None:
    """The figure a measure's cells show, named as ``linking.populations.measures_of`` names it (a
    count however asked for; any other one statistic of its variable); None when they show several."""
    if stats and stats <= {"size", "count"}:
        return ("count", "")
    if len(stats) == 1:
        return (next(iter(stats)), "" if var is None else str(var))
    return None


def _in_label_order(entry: Entry, cells: np.ndarray, dims: list[str]) -> np.ndarray:
    """``cells`` sorted by their labels, dimension by dimension (labels of mixed types by their
    text; missing labels first).

    Why: the search breaks ties between equal cells by their order, and the order of an engine's
    groups is not the data's (a polars ``group_by`` returns its groups in any order): F 35 and
    M 35 beside a hidden third group got F or M hidden from one run to the next. The protection
    is mapped back by labels, so the order it sees is free: the labels' order makes the same
    table get the same pattern however its rows came.
    """
    if len(cells) < 2 or not dims:
        return cells
    codes = []
    for d in reversed(dims):
        labels = np.asarray(entry.flat.dims[d][cells], dtype=object)
        try:  # the labels' own order (a pandas table's groups are in it already: nothing moves)
            code, _ = pd.factorize(labels, sort=True)  # (missing labels: -1, first)
        except TypeError:  # labels of mixed types: their text
            code, _ = pd.factorize(np.asarray([f"{type(v).__name__}:{v}" for v in labels], dtype=object), sort=True)
        codes.append(code)
    return cells[np.lexsort(codes)]


@dataclass
class _Union:
    """The union of two audited patterns over the same cells (see _protect_both_sides)."""

    cells: pd.DataFrame
    audit_ok: bool
    method: str | None
    message: str | None


def _protect_both_sides(protect: Any, cells: pd.DataFrame, internal: list[str], units: np.ndarray,
                        lack_primary: np.ndarray, rules: Rules, kwargs: dict[str, Any]) -> _Union:
    """Protect an indicator's counts on both sides: units with and without the attribute.

    A cell where fewer than ``threshold`` units *lack* the attribute must not be pinned
    close to its cell size: that is a frequency rule on the complement count
    (size − value). The complement is linear in the published figures when the cell sizes
    are known (the attacker is assumed to know them), so the table is protected twice,
    as frequency tables: the counts with the attribute (their own primaries) and the
    complements (the lack primaries). Hiding the union of both patterns only removes
    equations from each attacker's system, so both audits keep holding; the intervals
    of the final model are recomputed for the union from what stays published.
    """
    from ..protect.certificate import recompute_intervals

    n_inner = len(units)
    with_side = cells.copy()
    with_side.loc[with_side.index[:n_inner], "primary"] = cells["primary"].to_numpy()[:n_inner] & ~lack_primary
    lack_side = cells.copy()
    lack_side["value"] = np.concatenate([units - cells["value"].to_numpy()[:n_inner],
                                         cells["value"].to_numpy()[n_inner:]])
    lack_side["units"] = lack_side["value"]
    lack_side["primary"] = np.concatenate([lack_primary, np.zeros(len(cells) - n_inner, dtype=bool)])
    if "publish" in lack_side.columns:  # margin rows published elsewhere are sizes − counts, unknown here
        lack_side = lack_side.iloc[:n_inner].copy()
    first = _call_protect(protect, with_side, internal, None, rules, dict(kwargs), frequency=True)
    kw = {k: v for k, v in kwargs.items() if k != "publish" or "publish" in lack_side.columns}
    second = _call_protect(protect, lack_side, internal, None, rules, kw, frequency=True)
    out = first.cells.copy()
    key = list(internal)
    hidden_second = second.cells.assign(_h=second.cells["status"].isin(["primary", "secondary"]))
    merged = out.merge(hidden_second[[*key, "_h"]], on=key, how="left")
    extra = merged["_h"].fillna(False).to_numpy(dtype=bool) & (out["status"].to_numpy() == "safe")
    status = out["status"].to_numpy(dtype=object).copy()
    status[extra] = "secondary"
    out = recompute_intervals(out, key, status)
    ok = bool(getattr(first, "audit_ok", False)) and bool(getattr(second, "audit_ok", False))
    method = " + ".join(sorted({str(getattr(first, "method", "")), str(getattr(second, "method", ""))}))
    message = "; ".join(m for m in (getattr(first, "message", None), getattr(second, "message", None)) if m) or None
    return _Union(out, ok, method, message)


def _call_protect(protect: Any, cells: pd.DataFrame, internal: list[str], top: list[str] | None, rules: Rules,
                  kwargs: dict[str, Any], frequency: bool = False) -> Any:
    import warnings

    # (a caller's own hierarchies are never folded into: the display path declares none)
    nesting = nested_keys.plan(cells, internal) if "hierarchies" not in kwargs else None
    collapsed = nested_keys.collapse(cells, internal, nesting) if nesting is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if nesting is None or collapsed is None:
            return protect(cells, dims=internal, value="value", units="value" if frequency else "units", top=top,
                           rules=rules, primary="primary", margins=MARGINS, **kwargs)
        # keys that nest (district within region): one dimension with a hierarchy, the same
        # equations without the copies of every cell (see nested_keys)
        folded, kept = collapsed
        result = protect(folded, dims=kept, value="value", units="value" if frequency else "units", top=top,
                         rules=rules, primary="primary", margins=MARGINS,
                         hierarchies={nesting.child: nesting.hierarchy()}, **kwargs)
    cells_back = nested_keys.expand(result.cells, nesting, internal)
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.replace(result, cells=cells_back)
    result.cells = cells_back  # (a protector of the caller's that returns another kind of result)
    return result


def _map_protection(entry: Entry, sel: np.ndarray, margin: np.ndarray, dims: list[str], internal: list[str],
                    stat: set[str], result: Any, out: pd.DataFrame
                    ) -> tuple[np.ndarray, dict[int, tuple[float, float]], bool, str | None, str | None,
                               dict[str, Any]]:
    """Map the engine's cells (inner and margins) back onto the captured table's cells."""
    hidden_inner = out["status"].isin(["primary", "secondary"]).to_numpy()
    key_out = pd.MultiIndex.from_arrays([out[c].astype(object).to_numpy() for c in internal]) if len(dims) > 1 \
        else pd.Index(out[internal[0]].astype(object).to_numpy(), dtype=object)
    # map every cell of the measure (inner and margins) onto the protected table
    label = entry.margin_label
    arrays = []
    for d in dims:
        col = entry.flat.dims[d][sel].copy()
        real = ~margin if label is not None else np.ones(len(col), dtype=bool)
        col = np.where(real, escape_total(col), col)
        if label is not None:
            totals = (col == label) | ((col == "") & margin)
            col = np.where(totals, "Total", col)
        arrays.append(col.astype(object))
    key_sel = pd.MultiIndex.from_arrays(arrays) if len(dims) > 1 else pd.Index(arrays[0], dtype=object)
    pos = key_out.get_indexer(key_sel)
    hidden_sel = np.zeros(len(sel), dtype=bool)
    found = pos >= 0
    hidden_sel[found] = hidden_inner[pos[found]]
    lower = out["lower"].to_numpy(dtype=float)
    upper = out["upper"].to_numpy(dtype=float)
    intervals = {int(i): (float(lower[pos[i]]), float(upper[pos[i]])) for i in np.flatnonzero(found & hidden_sel)
                 if np.isfinite(lower[pos[i]])}
    ok = bool(getattr(result, "audit_ok", False))
    entry_rows = {int(sel[i]): int(pos[i]) for i in np.flatnonzero(found)}
    # the engine's cells keep internal dimension columns (a dimension may be called "status")
    model = {"dims": dims, "columns": internal, "cells": out, "stat": sorted(stat), "audit_ok": ok,
             "method": getattr(result, "method", None), "entry_rows": entry_rows}
    return hidden_sel, intervals, ok, getattr(result, "method", None), getattr(result, "message", None), model


