"""Certificates: what an output checker needs to re-verify a table without the data.

A certificate lists, for one exported table:

* the displayed cells as published (hidden cells carry no value), with their position
  in the CSV, so the CSV can be compared with it;
* for every protected measure, the whole protection model: every inner cell and every
  margin (label ``"Total"``) with its published value or, when hidden, its status and
  audited interval;
* the rules, the method and the versions.

:func:`verify_certificate` re-runs the attacker's linear programs from the certificate
alone — published cells, margins, inner cells ≥ 0 — with scipy's HiGHS, independently of
the engine that produced the pattern, and checks that every certified interval is
exactly what the published figures allow, that every hidden primary cell keeps a
protection interval that some value inside it can satisfy, and that published cells add
up to their published margins. Hidden values never appear in a certificate.
"""

from __future__ import annotations

import itertools
import math
import platform
from typing import Any

import numpy as np
import pandas as pd

SCHEMA = "sdc_magic.certificate/1"
TOTAL = "Total"
TOLERANCE = 1e-6


def _json_value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, np.integer | int) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, np.floating | float):
        f = float(v)
        if not math.isfinite(f):
            return None  # JSON has no NaN or infinity: an unbounded interval side is null
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if isinstance(v, np.bool_ | bool):
        return bool(v)
    return str(v)


def _json_column(values: Any, rounding: int = 0) -> list[Any]:
    """:func:`_json_value` (of :func:`_rounded` values) of a whole column, the same values.

    Why: the certificate of every displayed table states each cell's value; one Python call per
    cell through the type tests was a tenth of a second of a 10,000-cell display. Whole-number
    and float columns are converted with numpy at once; any other column cell by cell.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and not rounding:
        return arr.tolist()
    if arr.dtype.kind == "f" and not rounding:
        out = np.full(len(arr), None, dtype=object)
        finite = np.isfinite(arr)
        whole = finite & (np.abs(arr) < 2**53)
        whole[whole] = arr[whole] == np.trunc(arr[whole])
        out[whole] = arr[whole].astype(np.int64).tolist()
        rest = finite & ~whole
        out[rest] = arr[rest].astype(float).tolist()
        return out.tolist()
    values = arr.tolist()
    if not rounding and all(type(v) is str for v in values):
        return values  # (text labels are written as they are: 29 ms of a 10,000-row DuckDB table)
    return [_json_value(_rounded(v, rounding)) for v in values]


def _column_values(column: pd.Series) -> np.ndarray:
    """A column's values: numbers as a numpy array of their dtype, anything else as objects."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iuf":
        return column.to_numpy()
    return column.to_numpy(dtype=object)


def _labels(index: pd.Index) -> list[str]:
    """:func:`_label` of every entry of an index; a MultiIndex through its levels' distinct
    values (each written once, then joined per entry: 30 ms of a 10,000-row index cell by cell)."""
    if not isinstance(index, pd.MultiIndex):
        return [_label(v) for v in index]
    parts = []
    for level, codes in zip(index.levels, index.codes, strict=True):
        names = [str(v) for v in level] + [str(np.nan)]  # (code -1: a missing label, read as nan)
        parts.append([names[c] for c in codes.tolist()])
    return [" / ".join(t) for t in zip(*parts, strict=True)]


def _label(v: Any) -> str:
    if isinstance(v, tuple):
        return " / ".join(map(str, v))
    return str(v)


def versions() -> dict[str, str]:
    from ..config import __version__

    return {"sdc_magic": __version__, "pandas": pd.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def _rounded(value: Any, base: int) -> Any:
    """A published whole number rounded to ``base`` as the display rounds it (0: as is)."""
    if not base:
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        return value
    if not math.isfinite(f) or f != round(f):
        return value
    return int(np.round(f / base) * base)


def _attacker_table(cells: pd.DataFrame, columns: list[str], status: Any) -> dict[str, Any]:
    """A protection model's cells as the table :func:`intervals_from_published` reads, with ``status``."""
    return {"dims": list(columns), "cells": [
        {"labels": [str(v) for v in rec], "status": st, "value": val}
        for rec, st, val in zip(cells[list(columns)].itertuples(index=False), status,
                                cells["value"].to_numpy(dtype=float), strict=True)]}


def recompute_intervals(cells: pd.DataFrame, columns: list[str], status: np.ndarray) -> pd.DataFrame:
    """A copy of a protection model's cells with ``status`` and the attacker intervals of
    every hidden cell recomputed from what that status leaves published."""
    table = _attacker_table(cells, columns, status)
    lower = cells["lower"].to_numpy(dtype=float).copy()
    upper = cells["upper"].to_numpy(dtype=float).copy()
    for k, (lo, hi) in intervals_from_published(table).items():
        lower[k], upper[k] = lo, hi
    out = cells.copy()
    out["status"] = status
    out["lower"], out["upper"] = lower, upper
    return out


def finalise(checked: Any) -> int:
    """Make the protection models agree with the final decision on the displayed cells.

    After the per-table protection, later steps (the joint audit with earlier outputs)
    may hide more displayed cells. The models still call those cells safe, with their
    values, so a certificate built from them would publish what the CSV and the rendered
    table hide. Here every model cell whose displayed cell ended hidden becomes a
    secondary cell, and the attacker intervals of every hidden cell of that model are
    recomputed from what is still published (so ``verify`` finds exactly them). The
    displayed intervals are updated too. Returns how many model cells changed;
    idempotent.
    """
    positions = getattr(checked, "entry_positions", None)
    hidden_flat = getattr(checked, "hidden_flat", None)
    if positions is None or hidden_flat is None or not checked.models:
        return 0
    positions = np.asarray(positions)
    hidden_entry = {int(p) for p in positions[np.asarray(hidden_flat, dtype=bool) & (positions >= 0)]}
    changed_total = 0
    for model in checked.models:
        rows_of = model.get("entry_rows") or {}
        cells = model["cells"]
        status = cells["status"].to_numpy(dtype=object).copy()
        changed = [rows_of[e] for e in hidden_entry if e in rows_of and status[rows_of[e]] == "safe"]
        if not changed:
            continue
        status[changed] = "secondary"
        cells = recompute_intervals(cells, list(model.get("columns", model["dims"])), status)
        lower = cells["lower"].to_numpy(dtype=float)
        upper = cells["upper"].to_numpy(dtype=float)
        model["cells"] = cells
        changed_total += len(changed)
        # the displayed intervals follow the model (unless the display states none: they followed
        # from margins the table does not show, ``checking.intervals.settle_intervals``)
        if getattr(checked, "intervals_withheld", False):
            continue
        for i in np.flatnonzero(np.asarray(hidden_flat, dtype=bool) & (positions >= 0)):
            k = rows_of.get(int(positions[i]))
            if k is not None and np.isfinite(lower[k]):
                rc = (int(checked.cell_rows[i]), int(checked.cell_cols[i]))
                checked.intervals[rc] = (float(lower[k]), float(upper[k]))
    return changed_total


def shown_cells_pin(model: dict[str, Any], displayed: set[int] | None, rows: set[int]) -> set[int]:
    """Which of the model's hidden cells ``rows`` the cells the table displays (``displayed``: its
    entry positions) determine exactly, once the margins it does not show are unknown.

    Why (over-protection, stop 67): the protection assumes every margin known, so a hidden cell a
    margin of 0 pins (C's 2 men, none flagged, beside C's 10 women) read as "determined exactly"
    and sent a table of flag means that shows no margin to review. Two LPs per such cell: asked
    only for the hidden primaries the protection's own intervals pin (rare)."""
    cells = unpublished_margins(model, displayed)
    if not rows or not (cells["status"].to_numpy(dtype=object) == UNPUBLISHED).any():
        return set(rows)  # (no margin unshown: the protection's intervals are the published ones)
    columns = list(model.get("columns", model["dims"]))
    table = _attacker_table(cells, columns, cells["status"].to_numpy(dtype=object))
    found = intervals_from_published(table, only=set(rows))

    def pinned(k: int) -> bool:
        lo, hi = found.get(k, (math.nan, math.nan))
        if math.isnan(lo) or math.isnan(hi):
            return True  # (the attacker's LP failed: nothing proven, kept as pinned)
        return math.isfinite(hi) and hi - lo <= 1e-9 * max(1.0, abs(lo))

    return {k for k in rows if pinned(k)}


#: a margin of the protection model that the table does not show: no value in the certificate
UNPUBLISHED = "unpublished"


def unpublished_margins(model: dict[str, Any], displayed: set[int] | None = None) -> pd.DataFrame:
    """The model's cells as the certificate states them: a margin the table does not display is
    ``unpublished`` (no value).

    Why (red team, round 3): the certificate of a district table (A 40, B and C hidden) stated
    its grand total 73, which the table does not show and linking does not count as published;
    a later table of everyone under 100 (36 + 35) then gave 2 people aged 100+. The protection
    still assumed every margin known (a stronger attacker). The intervals that follow from the
    published cells alone are recomputed when the certificate is exported (:func:`restated`):
    at display time it would cost two LPs per hidden cell.
    """
    cells = model["cells"]
    columns = list(model.get("columns", model["dims"]))
    if not len(cells):
        return cells
    rows_of = model.get("entry_rows") or {}
    shown_rows = set(rows_of.values()) if displayed is None else {rows_of[e] for e in displayed if e in rows_of}
    status = cells["status"].to_numpy(dtype=object).copy()
    is_margin = np.zeros(len(cells), dtype=bool)
    for c in columns:
        is_margin |= cells[c].astype(str).to_numpy() == TOTAL
    shown = np.zeros(len(cells), dtype=bool)
    n_cells = len(cells)  # (not len(cells) per row: 10,000 DataFrame lengths were 8 ms)
    shown[[k for k in shown_rows if 0 <= k < n_cells]] = True
    # ``displayed`` (the captured table's cells the output shows): an inner cell a selection left
    # out is not published either (red team: A·M = 20 of an unstacked table shown by its F column
    # was in the certificate, and beside a later "M 21" gave C·M = 1)
    unpublish = (status == "safe") & ~shown & (is_margin if displayed is None else True)
    if not unpublish.any():
        return cells
    out = cells.copy()
    status[unpublish] = UNPUBLISHED
    out["status"] = status
    if displayed is not None:
        _rename_unshown_labels(out, columns, shown)
    return out


def _rename_unshown_labels(cells: pd.DataFrame, columns: list[str], shown: np.ndarray) -> None:
    """Labels no displayed cell carries are written as placeholders, one per label and dimension,
    so the relations stay as they are (red team: ages 101 and 102 dropped from a table were in its
    certificate, one person each)."""
    for c in columns:
        labels = cells[c].astype(object).to_numpy()
        # each distinct label once (numbered in order of first appearance), not each cell: a label
        # is left out when no shown cell carries it and it is no margin
        codes, distinct = pd.factorize(labels)
        if (codes < 0).any():
            # missing labels (None, NaN, NaT): factorize makes them one; compared one by one, as
            # Python's ``in`` compares them, a missing label of one kind shown keeps no other
            _rename_one_by_one(cells, c, labels, shown)
            continue
        unshown = np.ones(len(distinct), dtype=bool)
        unshown[codes[shown]] = False
        unshown &= np.array([str(v) != TOTAL for v in distinct], dtype=bool)
        if not unshown.any():
            continue
        names = np.full(len(distinct), None, dtype=object)
        for n, code in enumerate(np.flatnonzero(unshown).tolist(), start=1):
            names[code] = f"(not shown {n})"
        renamed = labels.copy()
        out = unshown[codes]
        renamed[out] = names[codes[out]]
        cells[c] = renamed


def _rename_one_by_one(cells: pd.DataFrame, c: str, labels: np.ndarray, shown: np.ndarray) -> None:
    keep = {v for v in labels[shown]} | {TOTAL}
    names: dict[Any, str] = {}
    renamed = [v if v in keep or str(v) == TOTAL else names.setdefault(v, f"(not shown {len(names) + 1})")
               for v in labels]
    if names:
        cells[c] = np.asarray(renamed, dtype=object)


def restated(cert: dict[str, Any], intervals: Any = None) -> dict[str, Any]:
    """A certificate as exported: in a table with ``unpublished`` margins, every interval is what
    the published cells alone allow (``intervals(table)``: the attacker's LP; ``verify``
    recomputes exactly these), and the displayed hidden cells drop the intervals the protection
    computed with those margins known. Other certificates are returned as they are."""
    tables = cert.get("tables") or []
    if not any(c.get("status") == UNPUBLISHED for t in tables for c in t.get("cells", [])):
        return cert
    import copy

    out = copy.deepcopy(cert)
    for table in out["tables"]:
        if not any(c.get("status") == UNPUBLISHED for c in table["cells"]):
            continue
        found = (intervals or intervals_from_published)(table)
        for k, (lo, hi) in found.items():
            table["cells"][k]["lower"], table["cells"][k]["upper"] = _json_value(lo), _json_value(hi)
    for item in out.get("hidden", []):
        item.pop("interval", None)
    return out


def build(out_id: str, checked: Any, csv_name: str, digest: str) -> dict[str, Any]:
    """The certificate of one checked table (only published values).

    A rounded table (``round_to``, OpenSAFELY) publishes rounded values only, in the
    displayed cells and in its protection tables alike; its tables say ``rounding`` and
    their intervals are what the rounded figures allow (each known within ± half the
    base), so the certificate never holds an unrounded count.
    """
    finalise(checked)
    rounding = int(checked.rounded) if getattr(checked, "rounded", None) else 0
    frame = checked.frame
    grid = frame.to_frame() if isinstance(frame, pd.Series) else frame
    published: list[dict[str, Any]] = []
    hidden: list[dict[str, Any]] = []
    # labels and values read once (per cell through .iat: 0.4 s on a 4,500-cell table)
    row_labels = _labels(grid.index)
    col_labels = _labels(grid.columns)
    # each column's values as the certificate states them, converted column by column
    columns_values = [_json_column(_column_values(grid.iloc[:, j]), rounding) for j in range(grid.shape[1])]
    hidden_grid = np.asarray(checked.hidden, dtype=bool)
    n_rows, n_cols = grid.shape  # (read once: DataFrame.shape per row was 64 ms of 10,000 cells)
    hidden_at = set(zip(*(a.tolist() for a in np.nonzero(hidden_grid)), strict=True)) if hidden_grid.any() else ()
    for i in range(n_rows):
        row_label = row_labels[i]
        for j in range(n_cols):
            if (i, j) in hidden_at:
                item: dict[str, Any] = {"position": [i, j], "row": row_label, "column": col_labels[j]}
                item["reasons"] = [r.rule for r in checked.reasons.get((i, j), [])]
                interval = checked.intervals.get((i, j))
                if interval is not None:
                    item["interval"] = [_json_value(interval[0]), _json_value(interval[1])]
                hidden.append(item)
            else:
                published.append({"position": [i, j], "row": row_label, "column": col_labels[j],
                                  "value": columns_values[j][i]})
    tables = []
    positions = getattr(checked, "entry_positions", None)
    displayed = None if positions is None else {int(e) for e in np.asarray(positions) if e >= 0}
    for model in checked.models:
        cells = unpublished_margins(model, displayed)
        dims = list(model["dims"])
        columns = list(model.get("columns", dims))
        rows = []
        # (read column by column and converted a column at a time: to_dict("records") was 0.1 s
        # of a 10,000-cell table, a conversion per cell another 0.1 s)
        n_cells = len(cells) if "status" in cells.columns else 0
        label_lists = [[str(v) for v in cells[c].tolist()] for c in columns] if n_cells else []
        labels_of = [list(t) for t in zip(*label_lists, strict=True)] if label_lists else [[] for _ in range(n_cells)]
        statuses = cells["status"].tolist() if n_cells else []
        safe = np.array([st == "safe" for st in statuses], dtype=bool)
        values = _json_column(_column_values(cells["value"])[safe], rounding) if safe.any() else []
        if (~safe).any():
            lowers = _json_column(_column_values(cells["lower"])[~safe])
            uppers = _json_column(_column_values(cells["upper"])[~safe])
            reasons_of = cells["reasons"].tolist() if "reasons" in cells.columns else [[]] * n_cells
        n_safe = n_other = 0
        for k in range(n_cells):
            row: dict[str, Any] = {"labels": labels_of[k], "status": statuses[k]}
            if safe[k]:
                row["value"] = values[n_safe]
                n_safe += 1
            else:
                row["lower"] = lowers[n_other]
                row["upper"] = uppers[n_other]
                n_other += 1
                row["reasons"] = [str(r) for r in reasons_of[k]]
            rows.append(row)
        table = {"measure": model.get("measure", ""), "dims": dims, "stat": model.get("stat", []),
                 "method": model.get("method"), "audit_ok": bool(model.get("audit_ok")), "cells": rows}
        if rounding:
            table["rounding"] = rounding
            for k, (lo, hi) in intervals_from_published(table).items():
                rows[k]["lower"], rows[k]["upper"] = _json_value(lo), _json_value(hi)
        tables.append(table)
    rules = checked.rules.as_dict() if checked.rules is not None else {}
    return {
        "schema": SCHEMA,
        "id": out_id,
        "file": csv_name,
        "status": checked.status,
        "digest": digest,
        "rules": rules,
        "method": checked.method,
        "call": checked.call,
        "shape": [int(grid.shape[0]), int(grid.shape[1])],
        "published": published,
        "hidden": hidden,
        "tables": tables,
        "versions": versions(),
        "assumptions": [
            "the protection assumed every margin over any subset of the table's dimensions known to the "
            "attacker; the intervals stated here follow from the published cells alone (a margin the table "
            "does not show is 'unpublished')",
            "inner cells are non-negative",
            "a combination of the dimensions that no row falls in (an empty cell, shown as 0 or missing, or "
            "left out) is a known zero: never hidden to protect another cell",
            "a unit that alone makes up a hidden cell knows its value (singleton attack)"
            if rules.get("singletons", True) else "singleton attack not modelled",
        ],
    }


# ------------------------------------------------------------------ verification
def cell_relations(labels: list[list[Any]], dims: int) -> tuple[list[int], list[tuple[int, list[int]]]]:
    """Inner cells, and for every margin the inner cells it sums."""
    inner = [k for k, lab in enumerate(labels) if TOTAL not in lab]
    index: dict[tuple, list[int]] = {}
    for k in inner:
        lab = labels[k]
        for fixed in itertools.product([False, True], repeat=dims):
            if not any(fixed):
                continue
            key = tuple(TOTAL if f else lab[d] for d, f in enumerate(fixed))
            index.setdefault(key, []).append(k)
    margins = []
    for k, lab in enumerate(labels):
        if TOTAL in lab:
            margins.append((k, index.get(tuple(lab), [])))
    return inner, margins


def intervals_from_published(table: dict[str, Any], only: set[int] | None = None) -> dict[int, tuple[float, float]]:
    """The attacker's interval of every hidden cell (or of the hidden cells ``only``), from the
    published cells alone."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    cells = table["cells"]
    labels = [list(c["labels"]) for c in cells]
    inner, margins = cell_relations(labels, len(table["dims"]))
    var_of = {k: i for i, k in enumerate(inner)}
    n = len(inner)
    half = float(table.get("rounding") or 0) / 2.0  # a rounded figure is known within ± half the base
    fixed_lb = np.zeros(n)
    fixed_ub = np.full(n, np.inf)
    for k in inner:
        if cells[k]["status"] == "safe":
            v = float(cells[k]["value"])
            fixed_lb[var_of[k]] = max(0.0, v - half) if half else v
            fixed_ub[var_of[k]] = v + half
    rows = [(k, parts) for k, parts in margins if cells[k]["status"] == "safe" and parts]
    A = lil_matrix((len(rows), n))
    b = np.zeros(len(rows))
    for r, (k, parts) in enumerate(rows):
        for p in parts:
            A[r, var_of[p]] = 1.0
        b[r] = float(cells[k]["value"])
    A = A.tocsr()
    if half and len(rows):  # v − h ≤ Σ parts ≤ v + h
        from scipy.sparse import vstack

        eq: dict[str, Any] = {"A_ub": vstack([A, -A]).tocsr(), "b_ub": np.concatenate([b + half, -(b - half)])}
    else:
        eq = {"A_eq": A, "b_eq": b} if len(rows) else {}
    bounds = list(zip(fixed_lb, fixed_ub, strict=True))
    out: dict[int, tuple[float, float]] = {}
    targets = [k for k, c in enumerate(cells) if c["status"] != "safe" and (only is None or k in only)]
    parts_of = dict(margins)
    for k in targets:
        c = np.zeros(n)
        for p in ([k] if k in var_of else parts_of.get(k, [])):
            c[var_of[p]] = 1.0
        lo = linprog(c, bounds=bounds, method="highs", **eq)
        hi = linprog(-c, bounds=bounds, method="highs", **eq)
        if lo.status != 0 or hi.status not in (0, 3):
            out[k] = (math.nan, math.nan)
            continue
        upper = math.inf if hi.status == 3 else -hi.fun
        out[k] = (float(lo.fun), float(upper))
    return out


def rounding_slack(table: dict[str, Any], parts: int) -> float:
    """How far a rounded margin may differ from the sum of its rounded parts."""
    return float(table.get("rounding") or 0) / 2.0 * (parts + 1)


def verify_certificate(cert: dict[str, Any], protection: float | None = None,
                       intervals: Any = None) -> list[str]:
    """Problems found in a certificate (empty list: it verifies).

    ``intervals(table, relations)`` computes the attacker's intervals (default: the
    scipy LP here; ``verify`` passes the faster one of :mod:`sdc_magic.records.reaudit`).
    """
    problems: list[str] = []
    if cert.get("schema") != SCHEMA:
        problems.append(f"unknown certificate schema {cert.get('schema')!r}")
        return problems
    m = (protection if protection is not None else float(cert.get("rules", {}).get("protection", 10.0))) / 100.0
    for t, table in enumerate(cert.get("tables", [])):
        cells = table["cells"]
        labels = [list(c["labels"]) for c in cells]
        relations = cell_relations(labels, len(table["dims"]))
        margins = relations[1]
        # published margins equal the sum of their published parts when all parts are published
        for k, parts in margins:
            if cells[k]["status"] != "safe" or not parts:
                continue
            if all(cells[p]["status"] == "safe" for p in parts):
                total = sum(float(cells[p]["value"]) for p in parts)
                slack = rounding_slack(table, len(parts))
                if abs(total - float(cells[k]["value"])) > TOLERANCE * max(1.0, abs(total)) + slack:
                    problems.append(f"table {t}: margin {labels[k]} = {cells[k]['value']} but its cells sum to {total:g}")
        try:
            recomputed = intervals(table, relations) if intervals is not None else intervals_from_published(table)
        except Exception as exc:  # a malformed certificate must fail, not crash
            problems.append(f"table {t}: audit could not run ({type(exc).__name__})")
            continue
        for k, (lo, hi) in recomputed.items():
            c = cells[k]
            if math.isnan(lo):
                problems.append(f"table {t}: published cells are inconsistent around {labels[k]}")
                continue
            want_lo = float(c["lower"]) if c.get("lower") is not None else -math.inf
            want_hi = float(c["upper"]) if c.get("upper") is not None else math.inf
            if not (_close(lo, want_lo) and _close(hi, want_hi)):
                problems.append(f"table {t}: hidden cell {labels[k]} certified [{c.get('lower')}; {c.get('upper')}] "
                                f"but the published figures give [{lo:g}; {hi:g}]")
            if c["status"] == "primary":
                if hi - lo <= TOLERANCE:
                    problems.append(f"table {t}: primary cell {labels[k]} can be recovered exactly")
                elif math.isfinite(hi) and lo / (1 - m) > hi / (1 + m) + TOLERANCE if m < 1 else False:
                    problems.append(f"table {t}: no value in [{lo:g}; {hi:g}] keeps the {100 * m:g} % protection "
                                    f"of primary cell {labels[k]}")
    return problems


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return math.isinf(a) and math.isinf(b)
    if math.isnan(b):
        return False
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
