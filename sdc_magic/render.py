"""Render a checked table: text/plain and text/html of the protected version only.

Hidden cells become a marker that cannot be parsed as a number (``✕``), in both mime
types. A ``pass`` table is pandas' own rendering plus a small badge. The rendering is
built from a *copy* whose hidden cells were replaced before any formatting happens, so
no code path formats a hidden value.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .check import Checked

HIDDEN = "✕"
UNVERIFIED_MARK = "?"

STATUS_TEXT = {
    "pass": "cleared",
    "suppressed": "cleared with cells hidden",
    "review": "needs review",
    "blocked": "blocked",
}
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


def protected_frame(checked: Checked) -> pd.DataFrame | pd.Series:
    """A copy of the displayed object with hidden cells replaced by the marker.

    Numbers keep pandas' formatting as far as possible: floats are formatted with
    ``display.precision``; rounding (OpenSAFELY) is applied to published counts.
    """
    frame = checked.frame
    if not checked.hidden.any() and not checked.rounded and checked.unverified is None:
        return frame
    is_series = isinstance(frame, pd.Series)
    df = frame.to_frame() if is_series else frame
    precision = pd.get_option("display.precision")
    columns = []
    for j in range(df.shape[1]):
        col = df.iloc[:, j]
        values = col.to_numpy(dtype=object)
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
        values[checked.hidden[:, j]] = HIDDEN
        columns.append(values)
    grid = np.stack(columns, axis=1) if columns else np.empty((len(df), 0), dtype=object)
    out = pd.DataFrame(grid, index=df.index, columns=df.columns)
    if is_series:
        series = out.iloc[:, 0]
        series.name = frame.name
        return series
    return out


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


def render_plain(checked: Checked) -> str:
    """text/plain: the protected table as pandas prints it, then the banner and notes."""
    body = repr(protected_frame(checked))
    lines = [body, banner_text(checked)]
    lines += [f"  note: {n}" for n in notes_text(checked)]
    return "\n".join(lines)


def render_html(checked: Checked) -> str:
    """text/html: a status badge and banner, the protected table, and notes."""
    fg, bg = STATUS_STYLE.get(checked.status, ("#000", "#eee"))
    frame = protected_frame(checked)
    as_frame = frame.to_frame() if isinstance(frame, pd.Series) else frame
    # pandas' own HTML (it honours display.max_rows / max_columns, so huge tables stay small)
    table = as_frame._repr_html_() or html.escape(repr(frame))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in notes_text(checked))
    badge = (
        f'<span class="sdc-magic-badge" data-status="{checked.status}" role="status" '
        f'style="display:inline-block;padding:1px 6px;border-radius:8px;font-size:85%;'
        f'color:{fg};background:{bg};border:1px solid {fg}">{html.escape(STATUS_TEXT.get(checked.status, ""))}</span>'
    )
    banner = html.escape(banner_text(checked).removeprefix("sdc_magic: "))
    return (
        f'<div class="sdc-magic-output" data-status="{checked.status}">'
        f'<div class="sdc-magic-banner" style="margin-bottom:4px">{badge} '
        f'<small style="color:#444">{banner}</small></div>'
        f"{table}"
        + (f'<ul class="sdc-magic-notes" style="margin:2px 0;font-size:85%;color:#444">{notes}</ul>' if notes else "")
        + "</div>"
    )


def render_placeholder(reason: str, status: str = "blocked") -> tuple[str, str]:
    """Text and HTML of a withheld output (checking or rendering failed)."""
    text = (f"[sdc_magic: output withheld — {reason}. Nothing of the table is shown. "
            "Run %sdc debug to see the error, and report it if it is a bug.]")
    fg, bg = STATUS_STYLE[status]
    page = (f'<div class="sdc-magic-output" data-status="{status}" style="color:{fg};background:{bg};'
            f'padding:4px 8px;border:1px solid {fg}">{html.escape(text)}</div>')
    return text, page
