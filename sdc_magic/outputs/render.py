"""Render a checked table: text/plain and text/html of the protected version only.

Hidden cells become a marker that cannot be parsed as a number (``✕``), in both mime
types. A ``pass`` table is pandas' own rendering plus a small badge. The rendering is
built from a *copy* whose hidden cells were replaced before any formatting happens, so
no code path formats a hidden value.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd

from ..checking.check import Checked
from ..evidence.weak_table import WeakTable
from .bundle import STATUS_LABEL

HIDDEN = "✕"
UNVERIFIED_MARK = "?"

#: One vocabulary for users (``bundle.STATUS_LABEL``); the machine values stay pass/suppressed/review/blocked.
STATUS_TEXT = STATUS_LABEL
# Colour plus text (never colour alone); contrast ratios above 4.5:1 on their backgrounds.
STATUS_STYLE = {
    "pass": ("#0f5323", "#dafbe1"),
    "suppressed": ("#0b4a8f", "#ddf4ff"),
    "review": ("#6b4500", "#fff8c5"),
    "blocked": ("#82071e", "#ffebe9"),
}

RULE_WORDS = {
    "threshold": "below the threshold",
    "zero": "empty cells treated as disclosive",
    "dominance": "dominated by a few units",
    "p_percent": "p% rule",
    "extreme": "individual values (min/max)",
    "dof": "too few degrees of freedom",
    "row_threshold": "row too small",
    "secondary": "hidden to protect others",
    "negative": "negative contributions",
    "custom": "unknown statistic",
    "unverified": "not verified",
}


#: The protected frame of the latest decisions, by decision (text, HTML and payload draw the same one)
_drawn = WeakTable(4)


def protected_frame(checked: Checked) -> pd.DataFrame | pd.Series:
    """A copy of the displayed object with hidden cells replaced by the marker.

    Numbers keep pandas' formatting as far as possible: floats are formatted with
    ``display.precision``; rounding (OpenSAFELY) is applied to published counts. Made once per
    decision and state (the three renderings of a display drew it three times: 2–3 ms each on a
    1,000-cell table); any change of what it depends on makes it again.
    """
    state = (id(checked.frame), np.asarray(checked.hidden).tobytes(), np.asarray(checked.hidden).shape,
             checked.rounded, None if checked.unverified is None else np.asarray(checked.unverified).tobytes(),
             repr(sorted(map(repr, checked.hidden_labels))), None if checked.cell_cols is None
             else np.asarray(checked.cell_cols).tobytes(), pd.get_option("display.precision"))
    kept = _drawn.get(checked)
    if kept is not None and kept[0] == state and kept[1] is checked.frame:
        return kept[2]
    drawn = _draw_protected(checked)
    _drawn.set(checked, (state, checked.frame, drawn))
    return drawn


def _draw_protected(checked: Checked) -> pd.DataFrame | pd.Series:
    frame = checked.frame
    if not checked.hidden.any() and not checked.rounded and checked.unverified is None and not checked.hidden_labels:
        return frame
    is_series = isinstance(frame, pd.Series)
    df = frame.to_frame() if is_series else frame
    precision = pd.get_option("display.precision")
    text_masks = frozenset(m for m in checked.hidden_labels if isinstance(m, tuple))
    cell_columns = set(np.unique(np.asarray(checked.cell_cols)).tolist()) if checked.cell_cols is not None \
        else set(range(df.shape[1]))
    columns = []
    for j in range(df.shape[1]):
        col = df.iloc[:, j]
        values = np.array(col.to_numpy(dtype=object), dtype=object, copy=True)  # (pandas 3: read-only views)
        if pd.api.types.is_float_dtype(col.dtype):
            floats = col.to_numpy(dtype=float, na_value=np.nan)
            values = np.round(floats, precision).astype(object)
            values[np.isnan(floats)] = np.nan
        if checked.rounded and pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
            floats = col.to_numpy(dtype=float, na_value=np.nan)
            whole = np.isfinite(floats) & (floats == np.round(floats))
            rounded = (np.round(floats / checked.rounded) * checked.rounded)
            values = np.where(whole, rounded.astype(object), values)
            values[whole] = [int(v) for v in rounded[whole]]
        if checked.unverified is not None and checked.unverified[:, j].any():
            mark = checked.unverified[:, j]
            values[mark] = [f"{v} {UNVERIFIED_MARK}" for v in values[mark]]
        if j not in cell_columns and checked.hidden_labels:
            # keys shown as a column (polars, DuckDB, as_index=False): "C (n=3)" or a rare age of 101
            # is a label there too (a column holding no cell of the table)
            values = _masked_values(pd.Index(values, dtype=object), checked.hidden_labels)
        elif text_masks and not pd.api.types.is_numeric_dtype(col.dtype):
            values = _masked_values(pd.Index(values, dtype=object), text_masks)
        values[checked.hidden[:, j]] = HIDDEN
        columns.append(values)
    grid = np.stack(columns, axis=1) if columns else np.empty((len(df), 0), dtype=object)
    # (a default index numbers rows: its numbers are no labels of the data)
    index = df.index if isinstance(df.index, pd.RangeIndex) else _masked_labels(df.index, checked.hidden_labels)
    out = pd.DataFrame(grid, index=index, columns=_masked_labels(df.columns, checked.hidden_labels))
    if is_series:
        series = out.iloc[:, 0]
        series.name = mask_label(frame.name, checked.hidden_labels)
        return series
    return out


def _masked_labels(index: pd.Index, hidden: frozenset) -> pd.Index:
    """``index`` with every numeric label in ``hidden`` drawn as the hidden marker (any level)."""
    if not hidden:
        return index
    names = [mask_label(n, hidden) for n in index.names]  # (an axis name can state a count too)
    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_arrays([_masked_values(index.get_level_values(i), hidden)
                                          for i in range(index.nlevels)], names=names)
    return pd.Index(_masked_values(index, hidden), name=names[0], dtype=object)


def _masked_values(values: pd.Index, hidden: frozenset) -> np.ndarray:
    """One level's labels masked, each distinct label looked at once (a 6,000-cell table
    asked :func:`mask_label` 72,000 times, 0.25 s a display, label by label)."""
    out = np.empty(len(values), dtype=object)
    codes, uniques = pd.factorize(values)
    known = codes >= 0
    if len(uniques):
        masked = np.empty(len(uniques), dtype=object)
        masked[:] = [mask_label(u, hidden) for u in uniques]
        out[known] = masked[codes[known]]
    # (only the missing labels are read one by one: iterating an arrow-backed level label by
    # label was 55 ms of a 10,000-cell display)
    missing = np.flatnonzero(~known)
    for i, v in zip(missing.tolist(), values.take(missing).tolist() if len(missing) else [], strict=True):
        out[i] = v
    return out


def mask_label(value: object, hidden: frozenset) -> object:
    """A label (or a tuple of them) with the numbers in ``hidden`` drawn as the hidden marker
    (a text label named ``("text", label, number)`` in ``hidden``: that number in it)."""
    if isinstance(value, tuple):
        return tuple(mask_label(v, hidden) for v in value)
    if isinstance(value, str):
        numbers = sorted((item[2] for item in hidden if isinstance(item, tuple) and len(item) == 3
                          and item[1] == value), key=len, reverse=True)  # "4.1" before "4"
        for number in numbers:
            value = re.sub(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", HIDDEN, value)
        return value
    if hidden and isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_):
        return HIDDEN if float(value) in hidden else value
    return value


def banner_text(checked: Checked) -> str:
    """One plain-words line: status, how many cells are hidden and why."""
    label = STATUS_TEXT.get(checked.status, checked.status)
    parts = [f"sdc_magic: {label}"]
    if checked.kind == "row-level":
        parts.append("row-level data — never exportable")
    n = checked.hidden_count
    if n:
        total = checked.hidden.size
        why = checked.reason_summary()
        words = ", ".join(f"{count} {RULE_WORDS.get(rule, rule)}" for rule, count in sorted(why.items())
                          if rule not in ("negative", "custom", "unverified"))
        parts.append(f"{n} of {total} cells hidden ({words})" if words else f"{n} of {total} cells hidden")
    if checked.rules is not None:
        parts.append(checked.rules.describe())
    return " · ".join(parts)


def notes_text(checked: Checked) -> list[str]:
    return [n for n in dict.fromkeys(checked.notes)]


#: Bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069).
_BIDI_CONTROLS = {cp: f"⟨U+{cp:04X}⟩" for cp in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def visible_bidi_controls(text: str) -> str:
    """Bidi controls shown as ``⟨U+202E⟩`` instead of acting (issue 24.5).

    Why: a label holding U+202E (right-to-left override) reversed the rest of the reason
    sentence it was quoted in, in the text, the HTML fallback and the panel: an output checker
    could not read what was hidden and why.  Shown, the control is harmless and the label stays
    recognisable (the marks U+200E/U+200F of right-to-left text are left alone).
    """
    return text.translate(_BIDI_CONTROLS)


def render_plain(checked: Checked) -> str:
    """text/plain: the protected table as pandas prints it, then the banner and notes."""
    body = repr(protected_frame(checked))
    lines = [body, banner_text(checked)]
    lines += [f"  note: {n}" for n in notes_text(checked)]
    return visible_bidi_controls("\n".join(lines))


def badge_html(status: str) -> str:
    """The status badge of the HTML fallback (colour plus text)."""
    fg, bg = STATUS_STYLE.get(status, ("#000", "#eee"))
    return (f'<span class="sdc-magic-badge" data-status="{status}" role="status" '
            f'style="display:inline-block;padding:1px 6px;border-radius:8px;font-size:85%;'
            f'color:{fg};background:{bg};border:1px solid {fg}">{html.escape(STATUS_TEXT.get(status, ""))}</span>')


def with_exception(data: dict, metadata: dict, reason: str) -> tuple[dict, dict]:
    """The published bundle of an output after an exception request: the same content, status review.

    Built from what was already published (never re-rendered from the decision, which
    later outputs may have changed), so it cannot show anything the output did not show.
    """
    import copy
    import json

    from .bundle import MIME, content_digest

    meta = copy.deepcopy(metadata)
    record = meta["sdc_magic"]
    old = record["status"]
    note = f"exception requested: {reason}"
    page = str(data.get("text/html", ""))
    page = page.replace(badge_html(old), badge_html("review"), 1)
    page = page.replace(f'<div class="sdc-magic-output" data-status="{old}">',
                        '<div class="sdc-magic-output" data-status="review">', 1)
    if page.endswith("</div>"):
        page = page[:-len("</div>")] + f"<p><small>{html.escape(note)}</small></p></div>"
    text = str(data.get("text/plain", "")).replace(f"sdc_magic: {STATUS_TEXT.get(old, old)}",
                                                   f"sdc_magic: {STATUS_TEXT['review']}", 1) + f"\n  note: {note}"
    out: dict = {"text/plain": text, "text/html": page}
    if MIME in data:
        payload = json.loads(json.dumps(data[MIME]))
        payload.update(status="review", label=STATUS_TEXT["review"], exception=reason)
        out[MIME] = payload
    record.update(status="review", exception=reason, digest=content_digest(out))
    record["notes"] = [*record.get("notes", []), note]
    return out, meta


def render_html(checked: Checked, extras: str = "") -> str:
    """text/html: a status badge and banner, the protected table, notes (and static reasons/suggestions)."""
    frame = protected_frame(checked)
    as_frame = frame.to_frame() if isinstance(frame, pd.Series) else frame
    # pandas' own HTML (it honours display.max_rows / max_columns, so huge tables stay small)
    table = as_frame._repr_html_() or html.escape(repr(frame))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in notes_text(checked))
    badge = badge_html(checked.status)
    banner = html.escape(" · ".join(banner_text(checked).split(" · ")[1:]))  # the badge says the status
    return visible_bidi_controls(
        f'<div class="sdc-magic-output" data-status="{checked.status}">'
        f'<div class="sdc-magic-banner" style="margin-bottom:4px">{badge} '
        f'<small style="color:#444">{banner}</small></div>'
        f"{table}"
        + (f'<ul class="sdc-magic-notes" style="margin:2px 0;font-size:85%;color:#444">{notes}</ul>' if notes else "")
        + extras
        + "</div>"
    )


def render_placeholder(reason: str, status: str = "blocked", expected: bool = False) -> tuple[str, str]:
    """Text and HTML of a withheld output (checking or rendering failed).

    ``expected``: the reason is a documented case with its own advice (a polars LazyFrame is a
    plan: collect it), not a failure, so the placeholder does not send the user to a debug
    trace and a bug report (issue 24.6)."""
    advice = "" if expected else " Run %sdc debug to see the error, and report it if it is a bug."
    text = f"[sdc_magic: output withheld — {reason.rstrip(' .')}. Nothing of the table is shown.{advice}]"
    fg, bg = STATUS_STYLE[status]
    page = (f'<div class="sdc-magic-output" data-status="{status}" style="color:{fg};background:{bg};'
            f'padding:4px 8px;border:1px solid {fg}">{html.escape(text)}</div>')
    return text, page


# ---------------------------------------------------------------------------- the renderer's payload
#: Reasons listed in the payload (the renderer shows 60, then "show all"); the rest are counted.
MAX_REASONS_IN_PAYLOAD = 1_000
#: Reasons written into the static HTML fallback (the rest are counted).
MAX_REASONS_IN_HTML = 200
#: Rows of a suggestion's preview table (head and tail beyond that, as pandas does).
PREVIEW_ROWS = 20


def number_text(x: float) -> str:
    """A bound of an interval in plain words: no ``-0``, whole numbers without decimals."""
    x = float(x) + 0.0  # -0.0 → 0.0
    if abs(x) < 5e-10:
        return "0"
    if abs(x - round(x)) < 1e-9 * max(1.0, abs(x)):
        return str(round(x))
    return f"{x:.2f}".rstrip("0").rstrip(".")


def interval_text(interval: tuple[float, float] | None) -> str:
    if interval is None:
        return ""
    lo, hi = interval
    lo_ok, hi_ok = np.isfinite(lo), np.isfinite(hi)
    if lo_ok and hi_ok:
        return f"somewhere between {number_text(lo)} and {number_text(hi)}"
    if lo_ok:
        return f"at least {number_text(lo)}"
    if hi_ok:
        return f"at most {number_text(hi)}"
    return ""


def _label(value: object) -> str:
    if isinstance(value, tuple):
        return " / ".join(_label(v) for v in value)
    return str(value)


def cell_name(checked: Checked, i: int, j: int) -> str:
    """Where a cell is, in the table's own labels: ``Mirebalais / GBV · F``."""
    frame = checked.frame
    row = _label(mask_label(frame.index[i], checked.hidden_labels))
    if isinstance(frame, pd.DataFrame):
        return f"{row} · {_label(mask_label(frame.columns[j], checked.hidden_labels))}"
    return row


def _format_column(values: np.ndarray, precision: int) -> list[str]:
    """Cells as pandas would show a column of counts: whole floats as integers, missing as empty."""
    floats = [v for v in values if isinstance(v, float | np.floating) and np.isfinite(v)]
    whole = all(float(v).is_integer() for v in floats)
    decimals = 0
    if not whole:
        for v in floats:
            text = f"{float(v):.{precision}f}".rstrip("0")
            decimals = max(decimals, len(text.split(".")[1]) if "." in text else 0)
    out = []
    for v in values:
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float | np.floating) and np.isnan(v)):
            out.append("")
        elif isinstance(v, bool | np.bool_):
            out.append(str(bool(v)))
        elif isinstance(v, int | np.integer):
            out.append(str(int(v)))
        elif isinstance(v, float | np.floating):
            x = float(v) + 0.0
            out.append(str(round(x)) if whole and np.isfinite(x) else f"{x:.{decimals}f}")
        else:
            out.append(str(v))
    return out


def _shown(n: int, max_n: int | None, min_n: int | None = None) -> tuple[list[int], int | None]:
    """Positions shown of ``n`` (head and tail as pandas truncates) and where the gap is."""
    if not max_n or n <= max_n:
        return list(range(n)), None
    keep = min_n if min_n else max_n
    head = (keep + 1) // 2
    tail = keep // 2
    return list(range(head)) + list(range(n - tail, n)), head


def table_payload(frame: pd.DataFrame | pd.Series, hidden: np.ndarray | None = None,
                  max_rows: int | None = None, min_rows: int | None = None, max_cols: int | None = None
                  ) -> dict[str, object]:
    """A (protected) table as strings: header levels, row labels, cells; long tables truncated like pandas."""
    as_frame = frame.to_frame() if isinstance(frame, pd.Series) else frame
    if max_rows is None:
        max_rows = pd.get_option("display.max_rows")
        min_rows = pd.get_option("display.min_rows")
    if max_cols is None:
        max_cols = pd.get_option("display.max_columns")
    precision = int(pd.get_option("display.precision"))
    n_rows, n_cols = as_frame.shape
    rows_shown, row_gap = _shown(n_rows, max_rows, min_rows)
    cols_shown, col_gap = _shown(n_cols, max_cols)
    columns = as_frame.columns
    levels = columns.nlevels
    header = [[_label(columns.get_level_values(k)[j]) for j in cols_shown] for k in range(levels)]
    if isinstance(frame, pd.Series) and frame.name is None:
        header = [[""]]
    index = as_frame.index
    cells = [_format_column(as_frame.iloc[rows_shown, j].to_numpy(dtype=object), precision) for j in cols_shown]
    rows = []
    for k, i in enumerate(rows_shown):
        labels = [_label(index.get_level_values(m)[i]) for m in range(index.nlevels)]
        row: dict[str, object] = {"i": int(i), "index": labels, "cells": [c[k] for c in cells]}
        if hidden is not None:
            row["hidden"] = [int(c) for c, j in enumerate(cols_shown) if hidden[i, j]]
        rows.append(row)
    return {
        "shape": [int(n_rows), int(n_cols)],
        "index_names": ["" if n is None else _label(n) for n in index.names],
        "column_names": ["" if n is None else _label(n) for n in columns.names],
        "columns": header,
        "rows": rows,
        "row_gap": row_gap,
        "col_gap": col_gap,
    }


def reasons_payload(checked: Checked) -> tuple[list[dict[str, object]], int]:
    """One entry per hidden cell: where, why in plain words (never a count), and its interval."""
    hidden = [(i, j) for (i, j) in sorted(checked.reasons) if checked.hidden[i, j]]
    items = []
    for i, j in hidden[:MAX_REASONS_IN_PAYLOAD]:
        items.append({"cell": cell_name(checked, i, j), "row": int(i), "col": int(j),
                      "why": "; ".join(r.message for r in checked.reasons[(i, j)]),
                      "interval": interval_text(checked.intervals.get((i, j)))})
    return items, len(hidden)


def summary_text(checked: Checked) -> str:
    """The compact header line after the status: how many cells are hidden and why (no rules)."""
    parts = banner_text(checked).split(" · ")[1:]
    if checked.rules is not None and parts and parts[-1] == checked.rules.describe():
        parts = parts[:-1]
    return " · ".join(parts)


def suggestion_payload(s: object) -> dict[str, object]:
    checked = getattr(s, "checked", None)
    clean = bool(getattr(s, "publishes_cleanly", False))
    item: dict[str, object] = {
        "kind": str(getattr(s, "kind", "")),
        "title": str(getattr(s, "title", "")),
        "state": "nothing hidden" if clean else f"{getattr(s, 'hidden', 0)} of {getattr(s, 'cells', 0)} cells would still be hidden",
        "detail": str(getattr(s, "detail", "") or ""),
        "code": str(getattr(s, "code", "")),
        "clean": clean,
        "preview": None,
    }
    if checked is not None and clean:
        item["preview"] = table_payload(protected_frame(checked), checked.hidden, PREVIEW_ROWS, 10)
    return item


def render_payload(checked: Checked, out_id: str, suggestions: object = None,
                   exception: str | None = None) -> dict[str, object]:
    """The ``application/vnd.sdc-magic.v1+json`` payload: only protected content, only strings/ints."""
    reasons, total = reasons_payload(checked)
    payload: dict[str, object] = {
        "version": 1,
        "id": out_id,
        "status": checked.status,
        "label": STATUS_TEXT.get(checked.status, checked.status),
        "kind": checked.kind,
        "summary": summary_text(checked),
        "rules": checked.rules.describe() if checked.rules is not None else "",
        "hidden": int(checked.hidden_count),
        "cells": int(checked.hidden.size),
        # the header already says "row-level data — never exportable"
        "notes": [n for n in notes_text(checked) if not (checked.kind == "row-level" and n.startswith("row-level data"))],
        "table": table_payload(protected_frame(checked), checked.hidden),
        "reasons": reasons,
        "reasons_total": int(total),
        "suggestions": None,
        "more": False,
        "answer": "",
        "exception": exception,
    }
    if suggestions is not None:
        payload["suggestions"] = [suggestion_payload(s) for s in getattr(suggestions, "items", [])]
        payload["more"] = not bool(getattr(suggestions, "exhausted", True))
        payload["answer"] = str(getattr(suggestions, "answer", "") or "")
    return payload


def extras_html(payload: dict[str, object]) -> str:
    """Static reasons and suggestions (with their code) for front-ends without the renderer."""
    parts = []
    reasons = payload.get("reasons") or []
    if reasons:
        items = "".join(
            f"<li><b>{html.escape(str(r['cell']))}</b>: {html.escape(str(r['why']))}"
            + (f" — {html.escape(str(r['interval']))}" if r.get("interval") else "") + "</li>"
            for r in reasons[:MAX_REASONS_IN_HTML])  # type: ignore[index,union-attr]
        total = int(payload.get("reasons_total") or 0)
        listed = min(len(reasons), MAX_REASONS_IN_HTML)  # type: ignore[arg-type]
        more = f"<li>… and {total - listed} more</li>" if total > listed else ""
        parts.append(f'<details class="sdc-magic-reasons"><summary>Why cells are hidden ({total})</summary>'
                     f"<ul>{items}{more}</ul></details>")
    suggestions = payload.get("suggestions") or []
    if suggestions:
        items = "".join(
            f"<li><b>{html.escape(str(s['title']))}</b> <small>({html.escape(str(s['state']))})</small>"
            f"<pre>{html.escape(str(s['code']))}</pre></li>" for s in suggestions)  # type: ignore[index]
        parts.append(f'<details class="sdc-magic-suggestions"><summary>Better answers ({len(suggestions)})'  # type: ignore[arg-type]
                     f"</summary><ul>{items}</ul></details>")
    if payload.get("exception"):
        parts.append(f"<p><small>Exception requested: {html.escape(str(payload['exception']))}</small></p>")
    return "".join(parts)

