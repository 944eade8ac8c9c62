"""Labels that publish data even when their cells are hidden (decisions in the README).

* numeric labels held by fewer than ``threshold`` units (an age of 101): review, and drawn as
  the hidden marker (issue 23.5); outer bin edges that are the data's own extremes;
* labels stating a small number ("X (n=3)"): review, unless the label is a category of the data
  whose number is not its group's size ("Mobile team (2 staff)");
* group sizes used as labels (issue 23.2): the table is withheld.

Split from :mod:`.check` (one responsibility: what labels say).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..capture.depth import own_work
from ..capture.group_sizes import numbers_in
from ..config import Rules
from ..evidence.flatten import Flat
from ..evidence.registry import Entry
from ..rules import Reason
from .resolve import Resolved


def small_group_sizes_as_labels(entry: Entry, flat: Flat, ev: Any, rules: Rules) -> str | None:
    """Why the table is withheld, when a dimension's labels are group sizes below the threshold.

    Hiding cells does not hide labels, and such a label is a count: with the table of those
    groups beside it, every hidden group is pinned to the small sizes listed (issue 23.2; see
    :mod:`sdc_magic.capture.group_sizes`).
    """
    sizes = getattr(entry, "size_labels", None)
    if not sizes:
        return None
    inner = ~np.asarray(ev.is_margin, dtype=bool)
    for dim, groups in sizes.items():
        if dim not in flat.dims:
            continue
        stated = numbers_in(pd.Series(flat.dims[dim][inner], dtype=object))  # "2 cases" states 2 too
        if stated is None:
            continue
        labels = stated.to_numpy(dtype=float)
        if ((labels > 0) & (labels < rules.threshold)).any():
            return (f"the labels of {dim} are the sizes of the groups of {groups} (counts), and some are below "
                    f"{rules.threshold}: they would be published whatever is hidden; band {dim} (e.g. "
                    f"pd.cut({dim}, [0, {rules.threshold - 1}, ...])) or count the groups of {groups} directly")
    return None


#: Protection rounds for a table of shares (each may add cells that a single hidden share needs).
_SMALL_NUMBER_IN_LABEL = re.compile(r"(?:\bn\s*[=:]\s*|[\(\[]\s*)(\d+)(?=\s*(?:[\)\]]|\b))", re.IGNORECASE)
#: a whole number standing on its own in a label ("C has 3 people", "C: 3"; not "v1" nor "2.5", nor
#: a part of a date, range or time: "2024-03", "0-4", "10:30" are codes, not counts)
_NUMBER_TOKEN = re.compile(r"(?<![\w.,])(?<!\d[-/:])(\d+)(?![\w]|[.,]\d|[-/:]\d)")
#: any number in a label, decimals included ("B (41.1%)"), dates, ranges and times left
_ANY_NUMBER = re.compile(r"(?<![\w.,])(?<!\d[-/:])(\d+(?:[.,]\d+)?)(?![\w]|[.,]\d|[-/:]\d)")


@own_work
def label_disclosure(resolved: Resolved, ev: Any, rules: Rules, reasons: dict[int, list[Reason]],
                      notes: list[str], rare_out: set[float] | None = None,
                      text_out: set[tuple[str, str, str]] | None = None,
                      sizes: dict[str, tuple[set[int], set[int]]] | None = None) -> bool:
    """Labels that publish data even when their cells are hidden (decision, see README).

    * A numeric label (an age of 101, an income of 250,000) held by fewer than
      ``threshold`` units is one person's value: hiding its cells does not hide the
      label. The table goes to ``review`` with the advice to band the dimension, and the
      label is drawn as the hidden marker (``rare_out`` collects it).
    * A label that states a small number ("X (n=3)", "[2]") publishes that number: it is drawn
      with the number as the hidden marker (``text_out`` collects ``("text", label, number)``,
      the form :func:`sdc_magic.outputs.render.mask_label` reads), and the note does not repeat it.

    Returns whether the table needs review for its labels; reasons are attached to the
    cells of the offending label. ``sizes``: :func:`data_label_sizes` of the same table, when
    the caller has it (a display asks it twice: 30 ms each on 10,000 cells).
    """
    flat = resolved.flat
    assert flat is not None
    flagged = False
    inner = ~np.asarray(ev.is_margin, dtype=bool)
    first_measure = flat.measure == flat.measure[0] if len(flat) else np.zeros(0, bool)
    for dim, labels in flat.dims.items():
        # numbers only (no bools, strings, intervals); one pass in C, not a Python loop per cell
        if not inner.any() or pd.Index(labels[inner]).inferred_type not in ("integer", "floating",
                                                                           "mixed-integer-float"):
            continue
        sel = inner & first_measure
        if not sel.any():
            continue
        per_label = pd.Series(np.asarray(ev.units, dtype=float)[sel]).groupby(
            pd.Index(labels[sel], dtype=object), sort=False).sum()
        rare = per_label[(per_label > 0) & (per_label < rules.threshold)]
        if rare.empty:
            continue
        flagged = True
        rare_labels = set(rare.index.tolist())
        if rare_out is not None:
            rare_out.update(float(v) for v in rare_labels)
        message = (f"{dim} is a numeric value held by fewer than {rules.threshold} units here: the label itself "
                   f"identifies them, even with its cells hidden; band {dim} (aggregate up)")
        for i in np.flatnonzero(np.isin(labels, list(rare_labels))):
            reasons.setdefault(int(i), []).append(Reason("label", message))
        notes.append(f"{len(rare_labels)} label(s) of {dim} are values of fewer than {rules.threshold} units: "
                     "band this dimension before publishing")
    from ..capture.pandas import DATA_EDGES

    # the captured table's dimensions: a displayed index without a name (value_counts(bins=k)) has none
    dims = resolved.match.entry.flat.dims if resolved.match is not None and not flat.dims else flat.dims
    for dim, labels in dims.items():
        if not DATA_EDGES or not len(labels) or not isinstance(labels[0], pd.Interval):
            continue
        edges = {float(iv.right) for iv in labels if isinstance(iv, pd.Interval)} | \
            {float(iv.left) for iv in labels if isinstance(iv, pd.Interval)}
        if edges & DATA_EDGES:
            flagged = True
            notes.append(f"the outer bins of {dim} end at the data's own minimum or maximum (cut with a number "
                         "of bins, or qcut): that edge is one person's value; give the bin edges explicitly")
    frame = resolved.frame
    names = [*frame.index, *([] if isinstance(frame, pd.Series) else frame.columns), *axis_names(frame)]
    # keys shown as columns (polars, DuckDB: a default index) are labels too ("C (n=3)" in a column)
    names += list(dict.fromkeys(v for labels in flat.dims.values() for v in pd.unique(np.asarray(labels, dtype=object))
                                if isinstance(v, str)))
    data_units = data_label_sizes(resolved, ev) if sizes is None else sizes
    # each distinct text read once (the rows of a 10,000-cell table repeat ~100 labels: 30,000
    # parts through the patterns cell by cell were 50 ms), its note written once
    parts = dict.fromkeys(part for label in dict.fromkeys(names)
                          for part in (label if isinstance(label, tuple) else (label,)) if isinstance(part, str))
    for part in parts:
        small = []
        written = set(_SMALL_NUMBER_IN_LABEL.findall(part))
        for number in dict.fromkeys([*written, *_NUMBER_TOKEN.findall(part)]):
            # a category of the data ("Mobile team (2 staff)") states a count only when the
            # number is its own group's size (one of its cells' when written as a count, "C (2F)";
            # a bare number, "Team 1", only the whole group's: a cell of 1 is no reason); a label
            # written for the table always may
            known = data_units.get(part)
            if known is not None and int(number) not in (known[0] | known[1] if number in written else known[1]):
                continue
            if 0 < int(number) < rules.threshold:
                small.append(number)
        if small:
            # every small number of the label ("C: 2 F, 1 M"), named once
            flagged = True
            if text_out is not None:
                text_out.update(("text", part, number) for number in small)
            shown = part
            for number in sorted(small, key=len, reverse=True):
                shown = re.sub(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", "✕", shown)
            notes.append(f"the label {shown!r} states a number below the threshold: it is drawn "
                         "hidden; remove it from the label")
    return flagged


def axis_names(frame: pd.DataFrame | pd.Series) -> list[object]:
    """The names of a table's axes (index levels, column levels, a Series' name): drawn with it,
    so a name can state a count too ("district (C: n=3)", red team)."""
    out: list[object] = list(frame.index.names)
    if isinstance(frame, pd.DataFrame):
        out += list(frame.columns.names)
    else:
        out.append(frame.name)
    return [n for n in out if isinstance(n, str)]


def mask_numbers(text: str, numbers: set[float]) -> str:
    """``text`` with each of ``numbers`` (rare labels) written as the hidden marker."""
    for v in numbers:
        forms = {f"{v:g}", repr(v)} | ({str(int(v))} if float(v).is_integer() else set())
        for form in sorted(forms, key=len, reverse=True):
            text = re.sub(rf"(?<![\w.]){re.escape(form)}(?![\w]|\.\d)", "✕", text)
    return text


@own_work
@own_work
def data_label_sizes(resolved: Resolved, ev: Any) -> dict[str, tuple[set[int], set[int]]]:
    """For every text label of the captured table's own dimensions, (units of each cell carrying
    it, the group's size per measure: the units of its cells of one statistic together)."""
    flat = resolved.flat
    if resolved.match is None or flat is None or not flat.dims:
        return {}
    units = np.asarray(ev.units, dtype=float)
    # labels as captured (a renamed copy shows labels that are the analyst's text, not the data's)
    captured = {v for labels in resolved.match.entry.flat.dims.values() for v in pd.unique(np.asarray(labels))
                if isinstance(v, str)}
    measure = pd.Index(np.asarray(flat.measure, dtype=object).astype(str)) if len(flat.measure) == len(units) \
        else pd.Index(np.zeros(len(units), dtype=object))
    out: dict[str, tuple[set[int], set[int]]] = {}
    measure_codes = pd.factorize(measure)[0]
    n_measures = int(measure_codes.max()) + 1 if len(measure_codes) else 1
    for labels in flat.dims.values():
        if len(labels) != len(units):
            continue
        # per (label, measure): the units of its cells, and their sum (one factorization and one
        # bincount, not a pandas group per label: 10-20 ms of every display of 1,000 cells)
        codes, uniques = pd.factorize(pd.Index(labels, dtype=object), sort=False)
        wanted = np.array([isinstance(v, str) and v in captured for v in uniques], dtype=bool)
        keep = (codes >= 0) & wanted[np.maximum(codes, 0)] if len(uniques) else np.zeros(len(codes), dtype=bool)
        if not keep.any():
            continue
        pair = codes[keep].astype(np.int64) * n_measures + measure_codes[keep]
        sums = pd.Series(units[keep]).groupby(pair, sort=False).sum()
        for p_code, total in zip(sums.index.to_numpy(), sums.to_numpy(), strict=True):
            _, sizes = out.setdefault(str(uniques[int(p_code) // n_measures]), (set(), set()))
            sizes.add(int(total))
        kept_units = units[keep]
        if np.isfinite(kept_units).all():  # (each distinct (label, units) once: 60,000 adds on 10,000 cells)
            kept_codes, whole = codes[keep].astype(np.int64), np.trunc(kept_units).astype(np.int64)
            low, span = int(whole.min()), int(whole.max()) - int(whole.min()) + 1
            if int(kept_codes.max()) < 2**62 // span:  # (one hashed key per pair, not a sort of rows)
                key = pd.unique(kept_codes * span + (whole - low))
                pairs = zip((key // span).tolist(), (key % span + low).tolist(), strict=True)
            else:
                pairs = iter(np.unique(np.column_stack([kept_codes, whole]), axis=0).tolist())
            for code, u in pairs:
                out[str(uniques[code])][0].add(int(u))
        else:
            for code, u in zip(codes[keep].tolist(), kept_units.tolist(), strict=True):
                out[str(uniques[code])][0].add(int(u))
    return out


def numbers_in_hidden_labels(resolved: Resolved, ev: Any, hidden: np.ndarray,
                             sizes: dict[str, tuple[set[int], set[int]]] | None = None) -> set[tuple[str, str, str]]:
    """Numbers written into the labels of rows or columns with hidden cells, to draw hidden.

    Why (red team): ``B (n=30)`` beside B's hidden cells (hidden to protect C's 3) gives
    73 - 40 - 30 = 3; ``B (41.1%)`` and ``A (54.8%)`` give C's 4.1 %. A number the analyst wrote
    into the label of a row whose cells are hidden can state what they hide: every number of
    such a label is drawn as the hidden marker. Categories of the data keep their numbers
    ("Mobile team (2 staff)"): they name a group, they do not count it. Returns
    ``("text", label, number)`` entries (see :func:`sdc_magic.outputs.render.mask_label`).
    """
    flat = resolved.flat
    frame = resolved.frame
    if flat is None or not hidden.any():
        return set()
    rows = resolved.cell_rows if resolved.cell_rows is not None else flat.row_pos
    cols = resolved.cell_cols if resolved.cell_cols is not None else flat.col_pos
    data = data_label_sizes(resolved, ev) if sizes is None else sizes
    hidden_units = _hidden_units_by_label(flat, ev, hidden)
    labels: list[object] = [frame.index[i] for i in np.unique(np.asarray(rows)[hidden])]
    if isinstance(frame, pd.DataFrame):
        labels += [frame.columns[j] for j in np.unique(np.asarray(cols)[hidden])]
    labels += axis_names(frame)  # (they name every row or column: "district (N=73)" beside A 40, B 30)
    out: set[tuple[str, str, str]] = set()
    for label in labels:
        for part in label if isinstance(label, tuple) else (label,):
            if not isinstance(part, str):
                continue
            if part not in data:
                out.update(("text", part, number) for number in _ANY_NUMBER.findall(part))
            else:
                # a category of the data keeps its numbers, unless one is its own group's size
                # ("B: 30" made a category beside B's hidden cell gives C = 73 - 40 - 30, red team)
                # or the count of one of its hidden cells ("B – 15 women" beside B·F's hidden 15);
                # one equal to a cell it publishes tells nothing more (census of stop 57: "65+"
                # beside a shown cell of 65 was drawn "✕+", the table review)
                out.update(("text", part, number) for number in _NUMBER_TOKEN.findall(part)
                           if int(number) in data[part][1] or int(number) in hidden_units.get(part, ()))
    return out


def _hidden_units_by_label(flat: Any, ev: Any, hidden: np.ndarray) -> dict[str, set[int]]:
    """Per text label of the table's dimensions, the units of its hidden cells."""
    units = np.asarray(ev.units, dtype=float)
    at = np.flatnonzero(np.asarray(hidden, dtype=bool)[:len(units)] & np.isfinite(units))
    out: dict[str, set[int]] = {}
    for labels in flat.dims.values():
        if len(labels) != len(units):
            continue
        for i in at.tolist():
            if isinstance(labels[i], str):
                out.setdefault(labels[i], set()).add(int(units[i]))
    return out


def numbers_in_unverified_labels(frame: pd.DataFrame | pd.Series, hidden_rows: set, hidden_cols: set,
                                 threshold: int, categories: set[str]) -> set[tuple[str, str, str]]:
    """Numbers written into the text labels of a table without evidence, to draw hidden: small
    ones everywhere ("C (n=3)", "C: 3"), any beside hidden cells ("B: 30" gives C = 73 − 40 − 30).

    Why: a label built after the aggregation (a polars ``concat_str`` or ``format`` of the count, a
    label column joined on) states a figure nobody checked. ``categories``: labels of the captured
    tables (values of the data: the month "02" of a derived table is a category, not a count),
    whose numbers stay (the table is ``review`` anyway)."""
    out: set[tuple[str, str, str]] = set()
    labels = [(x, x in hidden_rows) for x in dict.fromkeys(frame.index)]
    if isinstance(frame, pd.DataFrame):
        labels += [(x, x in hidden_cols) for x in dict.fromkeys(frame.columns)]
    labels += [(x, bool(hidden_rows or hidden_cols)) for x in axis_names(frame)]
    for label, beside_hidden in labels:
        for part in label if isinstance(label, tuple) else (label,):
            if not isinstance(part, str) or part in categories:
                continue
            if beside_hidden:
                out.update(("text", part, number) for number in _ANY_NUMBER.findall(part))
            for number in dict.fromkeys([*_SMALL_NUMBER_IN_LABEL.findall(part), *_NUMBER_TOKEN.findall(part)]):
                if 0 < int(number) < threshold:
                    out.add(("text", part, number))
    return out


def captured_categories(registry: Any) -> set[str]:
    """Every text label of the session's captured tables (values of the data)."""
    out: set[str] = set()
    for entry in registry.entries() if registry is not None else ():
        for labels in entry.flat.dims.values():
            out.update(v for v in pd.unique(np.asarray(labels, dtype=object)) if isinstance(v, str))
    return out


def mask_text_labels(text: str, masks: set[tuple[str, str, str]]) -> str:
    """``text`` (a note, a reason) with each masked label written as it is drawn."""
    by_label: dict[str, list[str]] = {}
    for _, part, number in masks:
        by_label.setdefault(part, []).append(number)
    for part, numbers in by_label.items():
        if part in text:
            masked = part
            for number in sorted(numbers, key=len, reverse=True):  # "4.1" before "4"
                masked = re.sub(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", "✕", masked)
            text = text.replace(part, masked)
    return text
