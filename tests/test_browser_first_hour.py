"""The first hour in a real browser (issue 24): what a new analyst does and must see right.

* Export is what the notebook shows: a deleted cell, a cleared output stay out of the panel's
  "Export cleared outputs", and the reply says so in words; ``%sdc export`` typed in a cell.
* The seed lesson's four-way table shows its better answers, in plain words, the coarser
  tables first, with code lines that are not clipped (JupyterLab and Notebook 7).
* A label holding U+202E (right-to-left override) cannot reverse the reason sentence: the
  label is isolated (``<bdi>`` or ``unicode-bidi: isolate``) in the output and the panel.

Same server, browser and helpers as ``test_browser.py`` (JupyterLab's server also serves
Notebook 7's ``/notebooks/`` pages). Screenshots: ``build/screenshots/first_hour_*.png``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_browser import (
    CURRENT_NOTEBOOK,
    OUTPUTS,
    SCREENSHOTS,
    browser,
    dialog_button,
    lab,
    menu,
    open_notebook,
    open_panel,
    page,
    run_all,
    shot,
    wait_kernel_idle,
    wait_no_dialog,
)
from test_server import TOKEN

pytestmark = pytest.mark.browser
#: test_browser.py's fixtures, used here as they are: its JupyterLab server (which serves Notebook
#: 7's /notebooks/ pages too), its chromium and its page (a screenshot of the last state kept)
FIXTURES = (browser, lab, page)

RLO = "\u202e"
SETUP = ("import pandas as pd\n"
         "from sdc_magic.datasets import make_referrals\n"
         "\n"
         "referrals = make_referrals()")
FOUR_WAY = 'referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()'


def _notebook(name: str, lab: Any, sources: list[str]) -> None:
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "source": src,
              "outputs": []} for i, src in enumerate(sources)]
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
    (lab.root / name).write_text(json.dumps(nb), encoding="utf-8")


def _cells(page: Any) -> Any:
    return page.locator(f"{CURRENT_NOTEBOOK} .jp-Cell")


def _select_cell(page: Any, index: int) -> None:
    """Command mode with cell ``index`` the only one selected."""
    cell = _cells(page).nth(index)
    cell.locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.wait_for_function(
        """i => {
          const cells = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')];
          return cells[i] && cells[i].classList.contains('jp-mod-active')
            && document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').dataset.jpMode !== 'edit';
        }""", arg=index)


def _ids_by_cell(page: Any) -> dict[int, str]:
    """The renderer's outputs: cell index → output id."""
    drawn = page.eval_on_selector_all(OUTPUTS, """els => els.map(e => {
        const cell = e.closest('.jp-Cell');
        const cells = [...cell.parentElement.querySelectorAll(':scope > .jp-Cell')];
        return [cells.indexOf(cell), e.dataset.id, e.dataset.status];
      })""")
    return {c: i for c, i, _ in drawn}


def _exported_ids(folder: Path) -> set[str]:
    return {p.stem for p in folder.rglob("out-*.csv")}


# --------------------------------------------------------------------------- 1. export scope
def test_export_is_what_the_notebook_shows(lab: Any, page: Any) -> None:
    """Run all; delete a cell with a cleared table; clear another cell's output. The panel's
    "Export cleared outputs" writes the remaining table only, and its reply names the two left
    out in words; so does ``%sdc export`` typed in a cell (the lab extension tells the kernel
    which outputs the notebook shows whenever that changes)."""
    name = "first_hour_export.ipynb"
    _notebook(name, lab, [
        "%load_ext sdc_magic",
        SETUP,
        'referrals.groupby("admin2").size()',         # 2: kept
        'referrals.groupby("sex").size()',            # 3: its cell is deleted
        'referrals.groupby("case_category").size()',  # 4: its output is cleared
    ])
    open_notebook(page, lab, name)
    run_all(page, lab)
    page.wait_for_function(f"() => document.querySelectorAll('{OUTPUTS}').length === 3", timeout=120_000)
    ids = _ids_by_cell(page)
    assert set(ids) == {2, 3, 4}, ids
    kept, deleted, cleared = ids[2], ids[3], ids[4]
    statuses = page.eval_on_selector_all(OUTPUTS, "els => els.map(e => e.dataset.status)")
    assert all(s in ("pass", "suppressed") for s in statuses), statuses

    # -- delete cell 3 (Edit → Delete Cell), then clear the output of the cell now at 3 (formerly 4)
    _select_cell(page, 3)
    menu(page, "Edit", "notebook:delete-cell")
    page.wait_for_function(f"() => document.querySelectorAll('{CURRENT_NOTEBOOK} .jp-Cell').length === 4")
    _select_cell(page, 3)
    assert "case_category" in _cells(page).nth(3).locator(".cm-content").inner_text()
    menu(page, "Edit", "editmenu:clear-current")  # Edit → Clear Output
    page.wait_for_function(f"() => document.querySelectorAll('{OUTPUTS}').length === 1")
    assert page.locator(OUTPUTS).get_attribute("data-id") == kept

    # -- the panel lists what the notebook shows now; its export writes that alone
    open_panel(page)
    page.wait_for_function("() => document.querySelectorAll('#sdc-panel .sdc-Panel-item[data-cell=\"2\"]').length === 1"
                           " && !document.querySelector('#sdc-panel .sdc-Panel-item[data-cell=\"3\"] .sdc-Badge')")
    page.locator("#sdc-panel .sdc-Panel-export").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    page.wait_for_selector(".jp-Dialog .sdc-DialogText:has-text('exported')", timeout=120_000)
    reply = dialog.inner_text()
    shot(page, "first_hour_export_reply.png")
    assert f"--only={kept}" in reply, reply  # the command it ran: the one output the notebook shows
    written = re.search(r"exported (\d+) output\(s\) to (\S+): (.*)", reply)
    assert written, reply
    assert written.group(1) == "1" and written.group(3).strip() == kept, reply
    folder = Path(written.group(2))
    if not folder.is_absolute():
        folder = lab.root / folder
    assert _exported_ids(folder) == {kept}, sorted(folder.rglob("*"))
    # ... and it says in words which outputs of this kernel it left out, and why
    left_out = re.search(r"not exported \(the notebook no longer shows them[^)]*\): (.*)", reply)
    assert left_out, reply
    assert set(re.findall(r"out-\d+", left_out.group(1))) == {deleted, cleared}, reply
    dialog_button(page, "Close").click()
    wait_no_dialog(page)

    # -- %sdc export typed in a cell: the reply names what it wrote, in words, under the cell
    typed = lab.root / "typed_export"
    _select_cell(page, 3)
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.type(f"%sdc export {typed.name} --force")
    page.keyboard.press("Shift+Enter")
    out = _cells(page).nth(4).locator(".jp-OutputArea-output")
    out.first.wait_for(timeout=120_000)
    page.wait_for_function(
        "() => /exported \\d+ output/.test(document.querySelectorAll("
        "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[4].innerText)", timeout=120_000)
    text = _cells(page).nth(4).locator(".jp-OutputArea").inner_text()
    _cells(page).nth(4).scroll_into_view_if_needed()
    shot(page, "first_hour_export_typed.png")
    wait_kernel_idle(lab)
    written_typed = _exported_ids(typed)
    assert kept in written_typed, (text, written_typed)
    assert re.search(rf"exported {len(written_typed)} output\(s\) to {re.escape(typed.name)}: ", text), text
    assert all(i in text for i in written_typed), text
    # the lab extension told the kernel what the notebook shows: the deleted cell's and the cleared
    # output stay out, and the reply names them in words
    assert written_typed == {kept}, (text, written_typed)
    gone = re.search(r"not exported \(the notebook no longer shows them[^)]*\): (.*)", text)
    assert gone and set(re.findall(r"out-\d+", gone.group(1))) == {deleted, cleared}, text


# --------------------------------------------------------------------------- 2. suggestions
SUGGESTIONS_JS = """els => els.map(e => {
    const code = e.querySelector('.sdc-Suggestion-code');
    const style = getComputedStyle(code);
    return {kind: e.dataset.kind, title: e.querySelector('.sdc-Suggestion-title').textContent,
            text: e.innerText, scrollWidth: code.scrollWidth, clientWidth: code.clientWidth,
            overflowX: style.overflowX, wrap: style.whiteSpace, lines: code.value.split('\\n'),
            rightEdge: code.getBoundingClientRect().right,
            boxRight: e.closest('.jp-OutputArea-output, .jp-OutputArea-child').getBoundingClientRect().right};
  })"""


def _check_suggestions(page: Any, output: Any, where: str) -> list[dict[str, Any]]:
    """At least three suggestions, coarser tables or merged bands first (not a rate), plain words,
    code visible in full (no line clipped without a way to scroll to it)."""
    output.locator(".sdc-Suggestion").first.wait_for(timeout=60_000)
    summary = output.locator("details.sdc-Output-better > summary")
    if output.locator("details.sdc-Output-better").get_attribute("open") is None:
        summary.click()
    found = output.locator(".sdc-Suggestion").evaluate_all(SUGGESTIONS_JS)
    assert len(found) >= 3, (where, found)
    kinds = [s["kind"] for s in found]
    assert kinds[0] in ("drop", "merge", "cut", "other"), (where, kinds)  # aggregate up, merge bands
    assert kinds[0] != "rate" and kinds[1] != "rate", (where, kinds)
    for s in found:
        # plain words: no pandas in a title (the code is in the box below it)
        assert not re.search(r"groupby|\.size\(\)|\[\"|\bdf\b|lambda", s["title"]), (where, s["title"])
        assert s["title"].strip() and s["title"] == s["title"].strip(), (where, s["title"])
        # every code line can be read: it fits, or the box scrolls (never clipped by the output)
        fits = s["scrollWidth"] <= s["clientWidth"] + 1
        scrolls = s["overflowX"] in ("auto", "scroll")
        wraps = s["wrap"] in ("pre-wrap", "break-spaces", "normal", "pre-line")
        assert fits or scrolls or wraps, (where, s)
        assert s["rightEdge"] <= s["boxRight"] + 1, (where, "code box wider than the output", s)
    # the reply to the requester: plain words, no code
    answer = output.locator("details.sdc-Output-answer")
    assert answer.count() == 1, where
    assert "Answer the question" in answer.locator("summary").inner_text()
    reply = answer.locator(".sdc-Output-answerText").input_value()
    request = next((line for line in reply.splitlines() if line.startswith("**Request:**")), "")
    assert request and not re.search(r"groupby|\.size\(\)|\[\"", request), (where, request)
    assert not re.search(r"groupby|\.size\(\)", reply), (where, reply)
    return found


def test_four_way_table_suggestions_in_lab_and_notebook7(lab: Any, page: Any) -> None:
    """The seed lesson's four-way table: "Better answers" lists three or more, coarser tables or
    merged adjacent bands before any rate, titles in words; the same in Notebook 7."""
    name = "first_hour_four_way.ipynb"
    _notebook(name, lab, ["%load_ext sdc_magic", SETUP, FOUR_WAY])
    open_notebook(page, lab, name)
    run_all(page, lab)
    open_panel(page)  # the notebook narrower, as with the panel open: long code lines must still be readable
    output = page.locator(f'{OUTPUTS}[data-status="suppressed"]')
    output.wait_for(timeout=120_000)
    found = _check_suggestions(page, output, "JupyterLab")
    print("suggestions:", [(s["kind"], s["title"]) for s in found])
    widest = max(range(len(found)), key=lambda i: found[i]["scrollWidth"] - found[i]["clientWidth"])
    code = output.locator(".sdc-Suggestion-code").nth(widest)
    code.scroll_into_view_if_needed()
    code.screenshot(path=str(SCREENSHOTS / "first_hour_suggestion_code.png"))
    titles = [s["title"] for s in found]
    output.locator("details.sdc-Output-better").scroll_into_view_if_needed()
    shot(page, "first_hour_suggestions_lab.png")
    # the written reply to the requester: in words
    answer = output.locator("details.sdc-Output-answer")
    answer.locator("summary").click()
    answer.locator(".sdc-Output-answerText").scroll_into_view_if_needed()
    shot(page, "first_hour_answer.png")
    answer.locator("summary").click()

    # -- Notebook 7, same notebook (saved with its outputs; a new run in Notebook's own shell)
    menu(page, "File", "docmanager:save")
    page.wait_for_function(
        "() => !document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current.jp-mod-dirty')",
        timeout=30_000)
    for session in lab.api("/api/sessions"):
        lab.fetch(f"/api/sessions/{session['id']}", "DELETE")
    page.goto(f"{lab.url}/notebooks/{name}?token={TOKEN}")
    page.wait_for_selector(".jp-Notebook")
    run_all(page, lab)  # (Notebook 7 has the same Run menu and prompts)
    nb7 = page.locator('.jp-Notebook .sdc-Output[data-status="suppressed"]')
    nb7.wait_for(timeout=120_000)
    page.wait_for_function(
        "() => document.querySelector('.jp-Notebook .sdc-Output[data-status=\"suppressed\"] .sdc-Suggestion')",
        timeout=120_000)
    found7 = _check_suggestions(page, nb7, "Notebook 7")
    assert [s["title"] for s in found7][:3] == titles[:3]  # the same search: the same answers
    nb7.locator("details.sdc-Output-better").scroll_into_view_if_needed()
    shot(page, "first_hour_suggestions_nb7.png")


# --------------------------------------------------------------------------- 3. bidi label
CONTROLS_JS = """(root) => {
  // every text node holding a bidi embedding/override/isolate control, and whether an inline
  // ancestor isolates it (a block ancestor does not: inline text after the node shares its line)
  const out = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!/[\u202a-\u202e\u2066-\u2069]/.test(n.data)) { continue; }
    let isolated = false, e = n.parentElement;
    for (; e && getComputedStyle(e).display === 'inline'; e = e.parentElement) {
      const ub = getComputedStyle(e).unicodeBidi;
      if (e.tagName === 'BDI' || ['isolate', 'isolate-override', 'plaintext'].includes(ub)) { isolated = true; break; }
    }
    // alone in its block (a table cell holding just the label): nothing after it to reverse
    const alone = !isolated && e !== null && e.textContent === n.data;
    out.push({text: n.data, tag: n.parentElement.tagName, isolated, alone});
  }
  return out;
}"""
READING_ORDER_JS = """(el, words) => {
  // the left edge of each word on screen: in reading order, left to right
  const range = document.createRange();
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push(n); }
  return words.map(w => {
    const n = nodes.find(t => t.data.includes(w));
    if (!n) { return null; }
    const i = n.data.indexOf(w);
    range.setStart(n, i); range.setEnd(n, i + w.length);
    return range.getBoundingClientRect().left;
  });
}"""


def _no_live_control(root: Any, where: str) -> None:
    """No bidi control acts outside the label that holds it."""
    for hit in root.evaluate(CONTROLS_JS):
        assert hit["isolated"] or hit["alone"], (where, hit)


def _in_reading_order(element: Any, words: list[str], where: str) -> None:
    lefts = element.evaluate(READING_ORDER_JS, words)
    assert None not in lefts and lefts == sorted(lefts), (where, words, lefts, element.inner_text())


def test_a_bidi_label_is_isolated(lab: Any, page: Any) -> None:
    """A district named "\\u202eevil" with two people: the reason sentence names it inside a
    ``<bdi>``, its override shows as ⟨U+202E⟩ (as in text/plain), and the words after it read
    left to right: in the reasons, a suggestion's title and the panel (whose source line
    quotes the label too)."""
    name = "first_hour_bidi.ipynb"
    _notebook(name, lab, [
        "%load_ext sdc_magic",
        "import pandas as pd\n"
        f"district = [{json.dumps(RLO + 'evil')}] * 2 + ['Alpha'] * 40 + ['Beta'] * 45\n"
        "sex = (['F', 'M'] * 50)[:len(district)]\n"
        "people = pd.DataFrame({'district': district, 'sex': sex})",
        f"# districts Alpha, Beta and {RLO}evil (two people)\n"
        "pd.crosstab(people.district, people.sex)",
    ])
    open_notebook(page, lab, name)
    run_all(page, lab)
    output = page.locator(f'{OUTPUTS}[data-status="suppressed"]')
    output.wait_for(timeout=120_000)
    reasons = output.locator("details.sdc-Output-reasons")
    if reasons.get_attribute("open") is None:
        reasons.locator("summary").click()
    evil = output.locator(".sdc-Output-reasonList > li", has_text="evil").first
    evil.wait_for()
    # the reason sentence names the label, isolated in a <bdi>, the control shown not obeyed
    label = evil.locator("bdi")
    assert label.count() == 1 and label.inner_text().startswith("⟨U+202E⟩evil"), evil.inner_html()
    assert "fewer than 5" in evil.inner_text()
    _in_reading_order(evil, ["evil", "fewer", "than", "records"], "reason")
    # the table's row label, and every suggestion that quotes the label
    assert output.locator(".sdc-Output-table th", has_text="⟨U+202E⟩evil").count() == 1
    for title in output.locator(".sdc-Suggestion-head").all():
        if "evil" in title.inner_text():
            _in_reading_order(title, ["evil", "Alpha", "hidden"] if "Alpha" in title.inner_text() else
                              ["evil", "hidden"], "suggestion title")
    _no_live_control(output, "output")
    evil.scroll_into_view_if_needed()
    shot(page, "first_hour_bidi_output.png")
    assert "\\u202e" in output.locator(".sdc-Suggestion-code").first.input_value()  # code: an escape, not the control

    # -- the panel: the source line quotes the label; the words after it read in order
    open_panel(page)
    item = page.locator('#sdc-panel .sdc-Panel-item[data-cell="2"]')
    item.wait_for(timeout=60_000)
    source = item.locator(".sdc-Panel-source")
    assert "⟨U+202E⟩evil (two" in source.inner_text(), source.inner_text()
    _in_reading_order(source, ["districts", "evil", "(two"], "panel source")
    _no_live_control(page.locator("#sdc-panel"), "panel")
    assert "hidden" in item.inner_text()
    shot(page, "first_hour_bidi_panel.png")
