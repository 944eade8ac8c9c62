"""An ipywidgets view of a checked table: why cells are hidden, better answers, an exception request.

No longer published with outputs: a saved notebook showed "Error displaying widget: model
not found" in place of the table (a trusted notebook does not fall back to text/html), so
the lab extension's own renderer draws the same content from the output's data
(``application/vnd.sdc-magic.v1+json``, see :mod:`sdc_magic.outputs.render`). Kept for Python use.
Every trait holds *only protected content*: the protected table's HTML, reasons in plain
words (never a hidden value), audited intervals, and suggestions that themselves passed
the rules.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ..checking.check import Checked
from .render import STATUS_STYLE, cell_name, render_html
from .suggest import Suggestion, Suggestions

MAX_REASONS = 60


def reasons_html(checked: Checked) -> str:
    """One line per hidden cell: where, why, and where its value could lie."""
    items = []
    hidden = [(i, j) for (i, j) in sorted(checked.reasons) if checked.hidden[i, j]]
    for i, j in hidden[:MAX_REASONS]:
        why = "; ".join(r.message for r in checked.reasons[(i, j)])
        interval = checked.intervals.get((i, j))
        where = ""
        if interval is not None:
            where = f" — somewhere between {interval[0]:g} and {interval[1]:g}"
        items.append(f"<li><b>{html.escape(cell_name(checked, i, j))}</b>: {html.escape(why)}{where}</li>")
    more = len(hidden) - MAX_REASONS
    tail = f"<li>… and {more} more hidden cells</li>" if more > 0 else ""
    return f"<ul style='margin:0;padding-left:1.2em'>{''.join(items)}{tail}</ul>" if items else "<i>none</i>"


def _suggestion_box(s: Suggestion, on_use: Callable[[str], None]) -> W.Widget:
    state = "nothing hidden" if s.publishes_cleanly else f"{s.hidden} of {s.cells} cells would still be hidden"
    head = W.HTML(f"<b>{html.escape(s.title)}</b> <small>({html.escape(state)})</small>"
                  + (f"<br><small>{html.escape(s.detail)}</small>" if s.detail and s.kind == "rate" else ""))
    code = W.Textarea(value=s.code, layout=W.Layout(width="100%", height=f"{1.6 * (s.code.count(chr(10)) + 2)}em"),
                      disabled=False)
    preview = W.HTML(render_html(s.checked)) if s.checked is not None and s.publishes_cleanly else W.HTML("")
    use = W.Button(description="Use this", tooltip="Insert this code in a new cell below (or copy it)",
                   layout=W.Layout(width="auto"))
    note = W.HTML("")

    def clicked(_: Any) -> None:
        on_use(s.code)
        note.value = "<small>Code placed in a new cell below where the front-end allows it; otherwise copy it from the box.</small>"

    use.on_click(clicked)
    return W.VBox([head, preview, code, W.HBox([use, note])],
                  layout=W.Layout(border="1px solid #ddd", padding="4px", margin="2px 0"))


def build(checked: Checked, out_id: str, suggestions: Suggestions | None,
          on_use: Callable[[str], None], on_exception: Callable[[str], None],
          on_more: Callable[[], Suggestions | None] | None = None) -> W.Widget:
    """The widget for one checked table."""
    fg, bg = STATUS_STYLE.get(checked.status, ("#000", "#eee"))
    table = W.HTML(render_html(checked))
    why = W.HTML(reasons_html(checked))
    sections: list[W.Widget] = [why]
    titles = ["Why cells are hidden"]

    better = W.VBox()

    def fill(found: Suggestions | None) -> None:
        boxes: list[W.Widget] = []
        if found is None or not found.items:
            boxes.append(W.HTML("<i>No better answer found among the options tried.</i>"))
        else:
            boxes += [_suggestion_box(s, on_use) for s in found.items]
        if found is not None and not found.exhausted and on_more is not None:
            more = W.Button(description="More options", tooltip="Search further (takes longer)")

            def clicked(_: Any) -> None:
                more.disabled = True
                fill(on_more())

            more.on_click(clicked)
            boxes.append(more)
        better.children = tuple(boxes)

    fill(suggestions)
    sections.append(better)
    titles.append("Better answers")
    if suggestions is not None and suggestions.answer:
        sections.append(W.Textarea(value=suggestions.answer, layout=W.Layout(width="100%", height="14em")))
        titles.append("Answer the question (editable, ready to paste)")

    reason = W.Textarea(placeholder="Why should this output be released as it is? (recorded for the output checker)",
                        layout=W.Layout(width="100%"))
    send = W.Button(description="Request an exception", button_style="warning")
    sent = W.HTML("")

    def request(_: Any) -> None:
        text = reason.value.strip()
        if not text:
            sent.value = "<small>Give a reason first.</small>"
            return
        on_exception(text)
        sent.value = f"<small>Recorded for {html.escape(out_id)}: status is now <b>review</b>.</small>"

    send.on_click(request)
    sections.append(W.VBox([reason, W.HBox([send, sent])]))
    titles.append("Request an exception")

    accordion = W.Accordion(children=sections, titles=tuple(titles))
    accordion.selected_index = 1 if suggestions is not None and suggestions.items else 0
    header = W.HTML(f"<div style='color:{fg};background:{bg};padding:2px 6px;border-left:4px solid {fg}'>"
                    f"<b>sdc_magic</b> {html.escape(out_id)}: {checked.hidden_count} of {checked.hidden.size} "
                    "cells hidden. Hidden cells are shown as ✕.</div>")
    box = W.VBox([header, table, accordion])
    box.add_class("sdc-magic-widget")
    return box
