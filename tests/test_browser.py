"""The lab extension in a real browser: JupyterLab + Debian's chromium, driven by Playwright.

A JupyterLab server is started on 127.0.0.1 (free port, token) over a temporary root
holding a copy of the demo notebook; the test runs it, then checks the disclosure panel,
the output badges, the status bar, the export guard and the redacted copy it downloads.
Screenshots go to build/screenshots/.

These tests never skip: without /usr/bin/chromium (``make test`` installs it) they fail.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_server import TOKEN, Jupyter, start_jupyter

from sdc_magic.records.redact import clearance, redact_notebook

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo_notebooks" / "01_nineteen_cells.ipynb"
SCREENSHOTS = REPO / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
HIDDEN = "✕"

pytestmark = pytest.mark.browser


# --------------------------------------------------------------------------- server
Lab = Jupyter


def _plain_notebook() -> dict[str, Any]:
    """Outputs as a notebook without the kernel extension would hold them: no records."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": "p1", "metadata": {}, "execution_count": 1,
             "source": "import pandas as pd\npd.DataFrame({'case_id': [f'C{i:04d}' for i in (1, 2)]})",
             "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                          "data": {"text/plain": "  case_id\n0   C0001\n1   C0002",
                                   "text/html": "<table><tr><td>C0001</td></tr><tr><td>C0002</td></tr></table>"}}]},
            {"cell_type": "code", "id": "p2", "metadata": {}, "execution_count": 2,
             "source": "print('C%04d' % 3)",
             "outputs": [{"output_type": "stream", "name": "stdout", "text": "C0003\n"}]},
        ],
    }


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(DEMO, root / "demo.ipynb")
    shutil.copy(REPO / "demo_notebooks" / "02_better_answers.ipynb", root / "better.ipynb")
    (root / "plain.ipynb").write_text(json.dumps(_plain_notebook()), encoding="utf-8")

    # No news toast over the status bar.
    settings = base / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false"}), encoding="utf-8")
    # The kernel is this interpreter (the project's venv), whatever else is on the Jupyter path.
    kernel_dir = base / "data" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python",
        "env": {"SDC_MAGIC_CONFIG": "", "PYTHONHASHSEED": "0"},
    }), encoding="utf-8")
    env = {"JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
           "JUPYTER_PATH": str(base / "data")}
    server = start_jupyter(base, root, "jupyterlab", env=env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (make test does it as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def new_page(context: Any) -> Any:
    """A page that records its console messages and page errors (``page.console_messages``)."""
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    messages: list[str] = []
    pg.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
    pg.console_messages = messages  # type: ignore[attr-defined]
    return pg


def last_screenshot(pg: Any, name: str) -> None:
    """The last state of a test, for a look when one fails (never hides the test's own error)."""
    try:
        (SCREENSHOTS / "last").mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SCREENSHOTS / "last" / f"{name}.png"))
    except Exception:
        pass


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 950}, accept_downloads=True)
    pg = new_page(context)
    try:
        yield pg
    finally:
        last_screenshot(pg, request.node.name)
        context.close()


# --------------------------------------------------------------------------- helpers
CURRENT_NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"


def open_notebook(page: Any, lab: Lab, name: str) -> None:
    # A workspace of its own: tabs restored from another test would get in the way.
    workspace = re.sub(r"\W", "", name)
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={TOKEN}")
    page.wait_for_selector(CURRENT_NOTEBOOK)
    page.wait_for_selector("#sdc-panel", state="attached")
    page.wait_for_selector(".sdc-StatusItem")


def wait_kernel_idle(lab: Lab, timeout: float = 60) -> dict[str, Any]:
    """The first Run All is lost unless the kernel is connected and idle (measured)."""
    deadline = time.monotonic() + timeout
    kernels: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            kernels = lab.api("/api/kernels")
        except AssertionError:  # jupyter_server answers 500 while a kernel is still starting (measured)
            time.sleep(0.25)
            continue
        ready = [k for k in kernels if k.get("connections", 0) >= 1 and k.get("execution_state") == "idle"]
        if ready:
            return ready[0]
        time.sleep(0.25)
    pytest.fail(f"kernel not connected and idle within {timeout} s: {kernels}\n{lab.log_tail()}")


def menu(page: Any, top: str, command: str) -> None:
    page.locator(".lm-MenuBar-item", has_text=re.compile(rf"^{top}$")).click()
    page.locator(f'.lm-Menu-item[data-command="{command}"]').first.click()


def open_panel(page: Any) -> None:
    if not page.locator("#sdc-panel").is_visible():
        page.locator('.lm-TabBar-tab[data-id="sdc-panel"]').click()
    page.wait_for_selector("#sdc-panel", state="visible")


def panel_items(page: Any) -> list[tuple[int, int, str]]:
    rows = page.eval_on_selector_all(
        "#sdc-panel .sdc-Panel-item", "els => els.map(e => [e.dataset.cell, e.dataset.output, e.dataset.status])")
    return [(int(c), int(o), s) for c, o, s in rows]


def expected_status(output: dict[str, Any]) -> str:
    """What the panel must show: the record's status if cleared, review or blocked; else uncleared."""
    meta = (output.get("metadata") or {}).get("sdc_magic")
    status = meta.get("status") if isinstance(meta, dict) else None
    why = clearance(output)
    if why is None:
        return str(status)
    if status in ("review", "blocked"):
        return str(status)
    printed = output.get("output_type") == "stream" and output.get("name") != "stderr"
    marked = isinstance(meta, dict) and meta.get("kind") == "note" and status == "note"
    return "note" if printed or marked else "uncleared"  # working notes: never exported, not failures


def expected_items(nb: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(ci, oi, expected_status(o))
            for ci, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
            for oi, o in enumerate(cell.get("outputs", []))]


def source_of(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def dialog_button(page: Any, label: str) -> Any:
    return page.locator(".jp-Dialog .jp-Dialog-button", has_text=label)


def wait_no_dialog(page: Any) -> None:
    page.wait_for_selector(".jp-Dialog", state="detached")


def save_notebook(page: Any, lab: Lab, name: str) -> dict[str, Any]:
    """File → Save (retried if the click is lost); returns the notebook as saved on disk.

    The file is read from disk once the tab is no longer dirty: reading it through the
    contents API while the server writes it can make the server set it aside as
    ``NAME.invalid`` (its atomic-write recovery).
    """
    path = lab.root / name
    for _ in range(3):
        menu(page, "File", "docmanager:save")
        try:
            page.wait_for_function(
                "() => !document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current.jp-mod-dirty')",
                timeout=10_000)
        except Exception:  # the click was lost: save again
            continue
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                nb = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                time.sleep(0.2)
                continue
            if any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"):
                return nb
            time.sleep(0.2)
    pytest.fail(f"the notebook was not saved with its outputs\n{lab.log_tail(30)}")


def parse_table_cells(html: str) -> list[list[str]]:
    from bs4 import BeautifulSoup

    body = BeautifulSoup(html, "html.parser").find("tbody")
    assert body is not None, html[:300]
    return [[td.get_text().strip() for td in tr.find_all("td", recursive=False)]
            for tr in body.find_all("tr", recursive=False)]


def displayed_row(rows: list[list[str]], i: int, n_cells: int) -> list[str] | None:
    """Row ``i`` of the true table as pandas displays it: long tables show a head, "...", a tail."""
    dots = next((k for k, r in enumerate(rows) if r and all(t == "..." for t in r)), None)
    if dots is None:
        return rows[i]
    n_true = n_cells // max(1, len(rows[0]))
    tail = len(rows) - dots - 1
    if i < dots:
        return rows[i]
    if i >= n_true - tail:
        return rows[dots + 1 + i - (n_true - tail)]
    return None


def check_redacted_copy(copy: dict[str, Any], saved: dict[str, Any]) -> None:
    """The downloaded copy: only cleared outputs, no row-level data, no hidden value."""
    text = json.dumps(copy, ensure_ascii=False)
    assert "C0001" not in text and "C0002" not in text, "row-level case ids in the redacted copy"
    assert "widgets" not in copy.get("metadata", {})
    reference = json.loads(json.dumps(saved))
    redact_notebook(reference)
    kept = 0
    for cell, ref_cell in zip(copy["cells"], reference["cells"], strict=True):
        if cell["cell_type"] != "code":
            continue
        assert [o.get("output_type") for o in cell["outputs"]] == [o.get("output_type") for o in ref_cell["outputs"]]
        for output in cell["outputs"]:
            meta = (output.get("metadata") or {}).get("sdc_magic")
            if meta is None:
                assert "sdc_magic_redacted" in output["metadata"], output
                assert set(output["data"]) == {"text/plain"}
                continue
            kept += 1
            assert clearance(output) is None, output["metadata"]
            assert meta["status"] in ("pass", "suppressed") and meta["kind"] != "row-level"
            # the redacted copy keeps the record's short fields only (issue 23.8): no per-cell reasons
            assert "reasons" not in meta and "notes" not in meta, sorted(meta)
            if meta.get("hidden"):
                assert HIDDEN in "".join(output["data"]["text/html"]), "no hidden cell is displayed"
            if meta.get("hidden") and meta.get("reasons"):
                rows = parse_table_cells("".join(output["data"]["text/html"]))
                shown = 0
                for hidden in meta.get("reasons", []):
                    i, j = hidden["position"]
                    row = displayed_row(rows, i, meta["cells"])
                    if row is None:
                        continue  # in the part of a long table pandas leaves out ("...")
                    shown += 1
                    assert row[j] == HIDDEN, f"hidden cell {hidden['cell']} shows {row[j]!r}"
                assert shown > 0, "no hidden cell is displayed"
    assert kept >= 1, "the redacted copy kept no cleared output"
    assert any(c.get("outputs") for c in copy["cells"] if c["cell_type"] == "code")
    four_way_hidden_values(copy)


def four_way_hidden_values(copy: dict[str, Any]) -> None:
    """Ground truth from plain pandas: a kept four-way table shows ✕ on every cell under 5."""
    from sdc_magic.datasets import make_referrals

    for cell in copy["cells"]:
        if "groupby([\"admin2\", \"case_category\", \"age_band\", \"sex\"]" not in source_of(cell):
            continue
        for output in cell.get("outputs", []):
            if "sdc_magic" not in output.get("metadata", {}):
                continue  # removed (blocked): nothing of it left
            truth = make_referrals().groupby(["admin2", "case_category", "age_band", "sex"], dropna=False).size()
            rows = parse_table_cells("".join(output["data"]["text/html"]))
            if len(rows) != len(truth):
                continue  # a truncated display: covered by the per-cell positions above
            for i, value in enumerate(truth.to_numpy()):
                if value < 5:
                    assert rows[i][0] == HIDDEN, f"row {i}: true count {value} shown as {rows[i][0]!r}"


def shot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path))
    return path


# --------------------------------------------------------------------------- tests
def test_demo_notebook_panel_badges_guard_and_redacted_copy(lab: Lab, page: Any, tmp_path: Path) -> None:
    open_notebook(page, lab, "demo.ipynb")
    kernel = wait_kernel_idle(lab)
    menu(page, "Run", "runmenu:run-all")
    page.wait_for_function(
        """() => {
          const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')];
          return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""", timeout=120_000)
    wait_kernel_idle(lab)

    saved = save_notebook(page, lab, "demo.ipynb")
    expected = expected_items(saved)
    statuses = [s for _, _, s in expected]
    assert len(expected) >= 6, expected

    # -- the panel: every output, with the status computed from the saved notebook
    open_panel(page)
    page.wait_for_function(
        "n => document.querySelectorAll('#sdc-panel .sdc-Panel-item').length === n", arg=len(expected))
    page.wait_for_selector("#sdc-panel .sdc-Panel-footer:has-text('digests checked by the server')")
    got = panel_items(page)
    assert got == expected, "\n".join(
        page.locator(f'#sdc-panel .sdc-Panel-item[data-cell="{c}"][data-output="{o}"]').inner_text()
        for (c, o, s), e in zip(got, expected, strict=False) if (c, o, s) != e)
    by_source = {source_of(saved["cells"][ci]).strip().splitlines()[-1]: s for ci, _, s in expected}
    # Facts of the demo that do not depend on the protection details:
    assert by_source["referrals.head(3)"] == "blocked"  # row-level: never exportable
    # the extension's own messages are harmless and cleared: they never trip the guard
    assert by_source["%load_ext sdc_magic"] == "pass"
    assert by_source["%sdc status"] == "pass"
    assert any(s in ("pass", "suppressed") for s in statuses), "no cleared output in the demo"
    row_level = page.locator("#sdc-panel .sdc-Panel-item", has_text="referrals.head(3)")
    assert "row-level" in row_level.inner_text() and "never exportable" in row_level.inner_text()
    for status in ("pass", "suppressed", "review", "blocked", "uncleared", "note"):
        chip = page.locator(f'#sdc-panel .sdc-Panel-chip[data-status="{status}"]')
        assert chip.get_attribute("data-count") == str(statuses.count(status)), status
    assert page.locator("#sdc-panel .sdc-Panel-warning").is_hidden(), "version warning shown"

    # -- the status bar
    cleared = sum(s in ("pass", "suppressed") for s in statuses)
    status_text = page.locator(".sdc-StatusItem").inner_text()
    notes = statuses.count("note")
    noted = f" · {notes} note{'' if notes == 1 else 's'}" if notes else ""
    assert status_text == f"sdc: {cleared} cleared · {len(statuses) - cleared - notes} not cleared{noted}"

    # -- one badge per checked output (our renderer's header), none on the extension's messages
    kinds = [(saved["cells"][ci]["outputs"][oi].get("metadata", {}).get("sdc_magic") or {}).get("kind")
             for ci, oi, _ in expected]
    badged = sorted(s for s, k in zip(statuses, kinds, strict=True) if k != "message")
    page.wait_for_function(
        """n => {
          const nb = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook';
          const children = [...document.querySelectorAll(`${nb} .jp-OutputArea-child`)];
          const counts = children.map(c => c.querySelectorAll('.sdc-BadgeRow .sdc-Badge, .sdc-Output-header .sdc-Badge').length);
          return counts.length > 0 && counts.every(k => k <= 1) && counts.reduce((a, b) => a + b, 0) === n;
        }""", arg=len(badged))
    badges = page.eval_on_selector_all(
        ".jp-NotebookPanel:not(.lm-mod-hidden) :is(.sdc-BadgeRow, .sdc-Output-header) .sdc-Badge",
        "els => els.map(e => [e.dataset.status, e.textContent])")
    assert sorted(b[0] for b in badges) == badged
    labels = {"pass": "cleared", "suppressed": "cleared, cells hidden", "review": "needs review", "blocked": "blocked",
              "uncleared": "not cleared", "note": "working note"}
    assert all(b[1].startswith(labels[b[0]]) for b in badges), badges

    # -- click an entry: the notebook scrolls to that output and flashes it
    row_level.click()
    page.wait_for_selector(".jp-OutputArea-child.sdc-mod-flash")
    flashed = page.locator(".jp-OutputArea-child.sdc-mod-flash .sdc-Badge").first.get_attribute("data-status")
    assert flashed == "blocked"
    shot(page, "panel.png")

    # -- File → Download is guarded; the redacted copy comes from the server
    menu(page, "File", "docmanager:download")
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    n_uncleared = len(statuses) - cleared
    assert n_uncleared >= 1  # the row-level view
    title = "1 output is not cleared" if n_uncleared == 1 else f"{n_uncleared} outputs are not cleared"
    assert f"{title} for release" in dialog.inner_text()
    shot(page, "guard_dialog.png")
    with page.expect_download() as download_info:
        dialog_button(page, "Download redacted copy").click()
    download = download_info.value
    assert download.suggested_filename == "demo.redacted.ipynb"
    target = tmp_path / "demo.redacted.ipynb"
    download.save_as(target)
    wait_no_dialog(page)
    copy = json.loads(target.read_text(encoding="utf-8"))
    check_redacted_copy(copy, saved)

    # -- Save and Export Notebook As… → HTML: guarded too, exports the redacted copy
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).click()
    page.locator(".lm-Menu-item", has_text="Save and Export Notebook As").hover()
    page.locator('.lm-Menu-item[data-command="notebook:export-to-format"]', has_text="HTML").first.click()
    dialog.wait_for()
    assert "not cleared for release" in dialog.inner_text()
    with page.expect_download() as download_info:
        dialog_button(page, "Download redacted copy").click()
    html_path = tmp_path / "demo.redacted.html"
    download_info.value.save_as(html_path)
    wait_no_dialog(page)
    html = html_path.read_text(encoding="utf-8")
    assert "C0001" not in html and "sdc_magic: output removed" in html

    # -- the file browser's Download of the notebook: guarded (Cancel: nothing downloads)
    if not page.locator("#filebrowser").is_visible():
        page.locator('.lm-TabBar-tab[data-id="filebrowser"]').click()
    item = page.locator('#filebrowser .jp-DirListing-item[data-file-type="notebook"]', has_text="demo.ipynb")
    item.click(button="right")
    page.locator('.lm-Menu-item[data-command="filebrowser:download"]').click()
    dialog.wait_for()
    assert "not cleared for release" in dialog.inner_text()
    dialog_button(page, "Cancel").click()
    wait_no_dialog(page)
    open_panel(page)

    # -- Export cleared outputs runs the magic in the kernel and shows its reply
    page.locator("#sdc-panel .sdc-Panel-export").click()
    dialog.wait_for()
    page.wait_for_selector(".jp-Dialog .sdc-DialogText")
    assert "%sdc export --force" in dialog.inner_text()  # the default: one folder per notebook
    assert "--only=out-" in dialog.inner_text()  # the outputs the notebook shows (issue 24.2)
    assert "earlier kernel" not in dialog.inner_text()
    assert "build/export/demo" in dialog.inner_text(), dialog.inner_text()
    shot(page, "export_dialog.png")
    dialog_button(page, "Close").click()
    wait_no_dialog(page)

    # -- the status bar item is reachable with the keyboard: Enter opens the panel
    page.locator('.lm-TabBar-tab[data-id="sdc-panel"]').click()  # close the panel
    page.wait_for_selector("#sdc-panel", state="hidden")
    assert page.locator(".sdc-StatusItem").get_attribute("tabindex") == "0"
    page.locator(".sdc-StatusItem").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#sdc-panel", state="visible")

    # -- the kernel dies: the panel, the status bar and the guard still work
    assert lab.fetch(f"/api/kernels/{kernel['id']}", "DELETE").code == 204
    page.wait_for_function(
        "() => !/kernel: (idle|busy)/.test(document.querySelector('#sdc-panel .sdc-Panel-footer').textContent)",
        timeout=30_000)
    assert "starting" not in page.locator("#sdc-panel .sdc-Panel-footer").inner_text()
    assert panel_items(page) == expected
    assert page.locator(".sdc-StatusItem").inner_text() == status_text
    page.locator("#sdc-panel .sdc-Panel-export").click()
    dialog.wait_for()
    assert re.search(r"No running kernel|kernel stopped", dialog.inner_text()), dialog.inner_text()
    dialog_button(page, "Close").click()
    wait_no_dialog(page)
    menu(page, "File", "docmanager:download")
    dialog.wait_for()
    assert "not cleared for release" in dialog.inner_text()
    dialog_button(page, "Cancel").click()
    errors = [m for m in page.console_messages if m.startswith("pageerror")]
    assert not errors, errors


def test_without_kernel_extension_everything_is_uncleared(lab: Lab, page: Any, tmp_path: Path) -> None:
    open_notebook(page, lab, "plain.ipynb")
    open_panel(page)
    page.wait_for_function("() => document.querySelectorAll('#sdc-panel .sdc-Panel-item').length === 2")
    # the table has no record; the print is a working note (never exported either)
    assert [s for _, _, s in panel_items(page)] == ["uncleared", "note"]
    assert page.locator(".sdc-StatusItem").inner_text() == "sdc: 0 cleared · 1 not cleared · 1 note"
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .sdc-BadgeRow').length === 2")

    # the guard: a redacted copy holds no output at all
    menu(page, "File", "docmanager:download")
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    assert "2 outputs are not cleared for release" in dialog.inner_text()
    with page.expect_download() as download_info:
        dialog_button(page, "Download redacted copy").click()
    target = tmp_path / "plain.redacted.ipynb"
    download_info.value.save_as(target)
    text = target.read_text(encoding="utf-8")
    assert "C0001" not in text and "C0003" not in text


def test_guard_setting_switches_it_off(lab: Lab, page: Any, tmp_path: Path) -> None:
    raw = json.dumps({"guardEnabled": False})
    lab.api("/lab/api/settings/sdc-magic:plugin", method="PUT", body={"raw": raw})
    try:
        open_notebook(page, lab, "plain.ipynb")
        page.wait_for_selector('.sdc-StatusItem[data-guard="off"]')
        page.wait_for_selector(".sdc-StatusItem:has-text('not cleared')")
        with page.expect_download() as download_info:
            menu(page, "File", "docmanager:download")
        assert page.locator(".jp-Dialog").count() == 0
        target = tmp_path / "raw.ipynb"
        download_info.value.save_as(target)
        assert "C0001" in target.read_text(encoding="utf-8")  # guard off: the notebook as it is
    finally:
        lab.api("/lab/api/settings/sdc-magic:plugin", method="PUT", body={"raw": "{}"})


# --------------------------------------------------------------------------- the inline output
SDC_MIME = "application/vnd.sdc-magic.v1+json"
OUTPUTS = f"{CURRENT_NOTEBOOK} .sdc-Output"


def run_all(page: Any, lab: Lab) -> None:
    wait_kernel_idle(lab)
    menu(page, "Run", "runmenu:run-all")
    page.wait_for_function(
        """() => {
          const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')];
          return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""", timeout=120_000)
    wait_kernel_idle(lab)


def rendered_outputs(page: Any) -> list[dict[str, Any]]:
    """What our renderer drew, per output: status, id, cell index, hidden cells, reasons, suggestions."""
    return page.eval_on_selector_all(OUTPUTS, """els => els.map(e => {
        const cell = e.closest('.jp-Cell');
        const cells = [...cell.parentElement.querySelectorAll(':scope > .jp-Cell')];
        const reasons = e.querySelector('details.sdc-Output-reasons > summary');
        return {status: e.dataset.status, id: e.dataset.id, cell: cells.indexOf(cell),
                label: e.querySelector('.sdc-Output-header .sdc-Badge').textContent,
                hidden: e.querySelectorAll(':scope > .sdc-Output-table td.sdc-Hidden').length,
                reasons: reasons ? reasons.textContent : null,
                suggestions: e.querySelectorAll('.sdc-Suggestion').length};
      })""")


def payloads(nb: dict[str, Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    return {o["data"][SDC_MIME]["id"]: (ci, o["data"][SDC_MIME]) for ci, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" for o in c.get("outputs", []) if SDC_MIME in o.get("data", {})}


def widget_errors(page: Any) -> list[str]:
    text = page.locator(CURRENT_NOTEBOOK).inner_text()
    bad = [m for m in ("model not found", "Error displaying widget") if m in text]
    bad += [m for m in page.console_messages if m.startswith("pageerror") or "model not found" in m]
    return bad


def test_inline_output_use_this_exception_and_reopen(lab: Lab, page: Any, tmp_path: Path) -> None:
    """Demo 02 in JupyterLab: the renderer draws tables, reasons and suggestions; "Use this"
    inserts a cell below at once; an exception request turns the output into "needs review"
    everywhere; after save, kernel shutdown and reload everything still renders; the
    redacted copy opens clean."""
    open_notebook(page, lab, "better.ipynb")
    run_all(page, lab)
    page.wait_for_function(f"() => document.querySelectorAll('{OUTPUTS}').length >= 3")
    saved = save_notebook(page, lab, "better.ipynb")
    by_id = payloads(saved)
    kinds = [(o.get("metadata", {}).get("sdc_magic") or {}).get("kind") for c in saved["cells"]
             if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert "progress" not in kinds  # progress was replaced by its table
    drawn = rendered_outputs(page)
    assert [d["id"] for d in drawn] == list(by_id), (drawn, list(by_id))
    for d in drawn:
        cell, payload = by_id[d["id"]]
        assert d["cell"] == cell and d["status"] == payload["status"]
        assert d["label"] == {"pass": "cleared", "suppressed": "cleared, cells hidden", "review": "needs review",
                              "blocked": "blocked"}[d["status"]]
        shown_hidden = sum(len(r.get("hidden", [])) for r in payload["table"]["rows"])
        assert d["hidden"] == shown_hidden  # every ✕ of the payload, styled as hidden
        if payload["reasons_total"]:
            assert d["reasons"] == f"Why cells are hidden ({payload['reasons_total']})"
        assert d["suggestions"] == len(payload["suggestions"] or [])
    four = next(d for d in drawn if d["status"] == "suppressed" and d["suggestions"])
    assert four["hidden"] > 0
    assert not widget_errors(page)
    # badge rows only on what our renderer does not draw: prints (working notes) and the like
    assert page.locator(f"{CURRENT_NOTEBOOK} .jp-OutputArea-child .sdc-BadgeRow").count() == 0 or all(
        s in ("uncleared", "note") for s in page.eval_on_selector_all(
            f"{CURRENT_NOTEBOOK} .sdc-BadgeRow", "els => els.map(e => e.dataset.status)"))
    output = page.locator(f'{OUTPUTS}[data-id="{four["id"]}"]')
    output.scroll_into_view_if_needed()
    shot(page, "inline_output.png")

    # -- every reason is reachable: 60 listed, then all
    total = by_id[four["id"]][1]["reasons_total"]
    assert total > 60
    output.locator("details.sdc-Output-reasons > summary").click()
    reasons = output.locator(".sdc-Output-reasonList > li")
    assert reasons.count() == 60
    assert not re.search(r"-0\b", output.locator(".sdc-Output-reasonList").inner_text())
    output.locator(".sdc-Output-allReasons").click()
    assert reasons.count() == total
    output.locator("details.sdc-Output-reasons > summary").click()

    # -- "More options" keeps the earlier suggestions and adds to them
    before_titles = output.locator(".sdc-Suggestion-title").all_inner_texts()
    more = output.locator(".sdc-Output-more")
    if more.count():
        more.click()
        output.locator(".sdc-Output-actions .sdc-Output-note",
                       has_text=re.compile("more found|No further options")).first.wait_for(timeout=60_000)
        after_titles = output.locator(".sdc-Suggestion-title").all_inner_texts()
        assert len(after_titles) >= len(before_titles)
        assert set(before_titles) <= set(after_titles), (before_titles, after_titles)

    # -- "Use this": a new cell directly below the output's cell, at once, selected, with the code
    cells = page.locator(f"{CURRENT_NOTEBOOK} .jp-Cell")
    n_cells = cells.count()
    suggestion = output.locator(".sdc-Suggestion").first
    code = suggestion.locator(".sdc-Suggestion-code").input_value()
    suggestion.locator(".sdc-Suggestion-use").click()
    page.wait_for_function(f"n => document.querySelectorAll('{CURRENT_NOTEBOOK} .jp-Cell').length === n + 1",
                           arg=n_cells)
    new_cell = cells.nth(four["cell"] + 1)
    assert "jp-mod-active" in (new_cell.get_attribute("class") or "")
    assert new_cell.locator(".cm-content").inner_text().strip() == code.strip()
    assert "Inserted in a new cell below" in suggestion.locator(".sdc-Output-note").inner_text()
    # ... and it runs to a cleared table
    menu(page, "Run", "notebook:run-cell")
    new_cell.locator(".sdc-Output").wait_for(timeout=60_000)
    assert new_cell.locator(".sdc-Output").get_attribute("data-status") == "pass"
    shot(page, "use_this.png")

    # -- an exception request: the output, the panel and the status bar all say "needs review"
    open_panel(page)
    page.wait_for_selector("#sdc-panel .sdc-Panel-footer:has-text('digests checked by the server')")
    before = page.locator(".sdc-StatusItem").inner_text()
    output.locator("details.sdc-Output-exception > summary").click()
    output.locator(".sdc-Output-reason").fill("Needed at this level for the district planning meeting")
    output.locator(".sdc-Output-request").click()
    review = page.locator(f'{OUTPUTS}[data-id="{four["id"]}"][data-status="review"]')
    review.wait_for(timeout=30_000)
    assert review.locator(".sdc-Output-header .sdc-Badge").inner_text().endswith("needs review")
    assert "Needed at this level" in review.inner_text()
    page.wait_for_selector(
        f'#sdc-panel .sdc-Panel-item[data-cell="{four["cell"]}"][data-status="review"]', timeout=30_000)
    page.wait_for_function("t => document.querySelector('.sdc-StatusItem').textContent !== t", arg=before)
    cleared_before = int(re.search(r"(\d+) cleared", before).group(1))
    cleared_after = int(re.search(r"(\d+) cleared", page.locator(".sdc-StatusItem").inner_text()).group(1))
    assert cleared_after == cleared_before - 1
    shot(page, "exception_review.png")

    # -- %sdc exception from a cell: the kernel pushes the update, the earlier output shows it at once
    other = next((d for d in rendered_outputs(page) if d["status"] == "suppressed" and d["id"] != four["id"]), None)
    assert other is not None, "demo 02 has a second protected table (the INSEE age bands)"
    if other is not None:
        last = page.locator(f"{CURRENT_NOTEBOOK} .jp-Cell").last
        last.locator(".jp-InputArea-prompt").click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")  # a new cell below, command mode
        page.keyboard.press("Enter")
        page.keyboard.type(f'%sdc exception {other["id"]} "Needed by the national plan"')
        page.keyboard.press("Shift+Enter")
        page.locator(f'{OUTPUTS}[data-id="{other["id"]}"][data-status="review"]').wait_for(timeout=30_000)

    # -- save, shut the kernel down, reload: every table and its reasons render from the saved data
    saved = save_notebook(page, lab, "better.ipynb")
    by_id = payloads(saved)
    assert by_id[four["id"]][1]["status"] == "review"
    assert source_of(saved["cells"][four["cell"] + 1]).strip() == code.strip()
    expected_drawn = [(d["id"], d["status"], d["hidden"]) for d in rendered_outputs(page)]
    for session in lab.api("/api/sessions"):
        assert lab.fetch(f"/api/sessions/{session['id']}", "DELETE").code == 204
    page.console_messages.clear()
    page.reload()
    page.wait_for_selector(CURRENT_NOTEBOOK)
    page.wait_for_function(f"n => document.querySelectorAll('{OUTPUTS}').length === n", arg=len(expected_drawn))
    assert [(d["id"], d["status"], d["hidden"]) for d in rendered_outputs(page)] == expected_drawn
    reopened = page.locator(f'{OUTPUTS}[data-id="{four["id"]}"]')
    assert reopened.locator("details.sdc-Output-reasons > summary").inner_text().startswith("Why cells are hidden")
    assert not widget_errors(page)
    reopened.scroll_into_view_if_needed()
    shot(page, "reopened.png")

    # -- the new kernel did not make these outputs: their actions are off, with the reason, before
    # any click (issue 24.6: "More options" looked enabled and the old note stayed)
    kernel = wait_kernel_idle(lab)
    if page.locator(f"{OUTPUTS} .sdc-Output-more").count():
        page.locator(f"{OUTPUTS} .sdc-Output-kernelNote", has_text="has not loaded sdc_magic").first.wait_for(
            state="attached", timeout=30_000)
        # (each output asks the kernel on its own: wait for every one, not only the first)
        page.wait_for_function(
            "sel => [...document.querySelectorAll(sel)].every(b => b.disabled)",
            arg=f"{OUTPUTS} .sdc-NeedsKernel", timeout=30_000)
        # the extension loaded in the new kernel: it still did not make these outputs
        last = page.locator(f"{CURRENT_NOTEBOOK} .jp-Cell").last
        last.locator(".jp-InputArea-prompt").click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")
        page.keyboard.press("Enter")
        page.keyboard.type("%load_ext sdc_magic")
        page.keyboard.press("Shift+Enter")
        page.locator(f"{OUTPUTS} .sdc-Output-kernelNote", has_text="Made by an earlier kernel").first.wait_for(
            state="attached", timeout=30_000)
        assert page.eval_on_selector_all(f"{OUTPUTS} .sdc-NeedsKernel", "els => els.every(b => b.disabled)")
        assert not page.locator(f"{OUTPUTS} .sdc-Output-actions .sdc-Output-note",
                                has_text="load_ext").count()  # no stale note beside the new one
        kernel = wait_kernel_idle(lab)
    # -- no kernel at all: the actions are disabled, with a note
    assert lab.fetch(f"/api/kernels/{kernel['id']}", "DELETE").code == 204
    page.wait_for_selector(f"{OUTPUTS} .sdc-Output-kernelNote:visible", timeout=30_000)
    assert page.eval_on_selector_all(f"{OUTPUTS} .sdc-NeedsKernel", "els => els.every(b => b.disabled)")

    # -- the redacted copy holds no uncleared output and opens clean
    open_panel(page)
    with page.expect_download() as download_info:
        page.locator("#sdc-panel .sdc-Panel-download").click()
    target = tmp_path / "better.redacted.ipynb"
    download_info.value.save_as(target)
    copy = json.loads(target.read_text(encoding="utf-8"))
    outputs = [o for c in copy["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs and all(clearance(o) is None for o in outputs), [clearance(o) for o in outputs]
    assert redact_notebook(json.loads(json.dumps(copy))).removed == 0  # redacting it again removes nothing
    assert any(SDC_MIME in o.get("data", {}) for o in outputs)
    shutil.copy(target, lab.root / "better.redacted.ipynb")
    open_notebook(page, lab, "better.redacted.ipynb")
    page.wait_for_function(f"() => document.querySelectorAll('{OUTPUTS}').length > 0")
    page.wait_for_selector(".sdc-StatusItem:has-text('· 0 not cleared')")
    with page.expect_download():
        menu(page, "File", "docmanager:download")  # no guard: nothing to hold back
    assert page.locator(".jp-Dialog").count() == 0
    assert not widget_errors(page)


CONTRAST_JS = """(selector) => {
  const el = document.querySelector(selector);
  if (!el) { return null; }
  const parse = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = [255, 255, 255];
  for (let n = el; n; n = n.parentElement) {
    const p = parse(getComputedStyle(n).backgroundColor);
    if (p.length === 3 || (p.length === 4 && p[3] > 0)) { bg = p; break; }
  }
  const a = lum(parse(getComputedStyle(el).color)), b = lum(bg);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""
THEMES = "/lab/api/settings/@jupyterlab/apputils-extension:themes"


def test_dark_theme_contrast_and_keyboard_focus(lab: Lab, page: Any) -> None:
    """Issue 24.5: in JupyterLab Dark the hidden marker and the status-bar item read at 4.5:1 or
    more; Enter on the status-bar item moves the focus into the panel."""
    assert lab.fetch(THEMES, "PUT", {"raw": json.dumps({"theme": "JupyterLab Dark"})}).code in (200, 204)
    try:
        open_notebook(page, lab, "demo.ipynb")
        page.wait_for_selector("body[data-jp-theme-light='false']", state="attached")
        wait_kernel_idle(lab)
        menu(page, "Run", "runmenu:run-all")
        page.wait_for_selector(".sdc-Output-table td.sdc-Hidden", timeout=120_000)
        page.wait_for_selector(".sdc-StatusItem.sdc-mod-uncleared", timeout=60_000)
        hidden = page.evaluate(CONTRAST_JS, ".sdc-Output-table td.sdc-Hidden")
        status = page.evaluate(CONTRAST_JS, ".sdc-StatusItem.sdc-mod-uncleared")
        shot(page, "dark_theme.png")
        assert hidden is not None and hidden >= 4.5, hidden
        assert status is not None and status >= 4.5, status
        # the keyboard: Enter on the status-bar item opens the panel with the focus inside it
        page.locator(".sdc-StatusItem").focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("#sdc-panel", state="visible")
        page.wait_for_function("() => !!document.activeElement && !!document.activeElement.closest('#sdc-panel')")
        wait_kernel_idle(lab)
    finally:
        lab.fetch(THEMES, "PUT", {"raw": json.dumps({"theme": "JupyterLab Light"})})


def test_an_output_edited_by_hand_shows_one_verdict(lab: Lab, page: Any, tmp_path: Path) -> None:
    """Issue 24.8: a cleared table whose numbers were changed in the .ipynb (record kept) is
    "not cleared — changed after it was checked" by the server; the renderer's green header
    gives way, so the output never shows two badges that contradict each other."""
    from sdc_magic.jupyter.notebooks import execute

    ran = execute(DEMO, tmp_path / "ran.ipynb")
    nb = json.loads(json.dumps(ran))
    edited = None
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            payload = out.get("data", {}).get(SDC_MIME)
            if payload and payload.get("status") == "pass" and edited is None:
                text = json.dumps(payload["table"])
                changed = re.sub(r"(?<=[\[,])(\d+)(?=[,\]])", lambda m: str(int(m.group(1)) + 1), text, count=1)
                assert changed != text
                payload["table"] = json.loads(changed)
                edited = payload["id"]
    assert edited is not None, "the demo has a cleared table"
    (lab.root / "edited.ipynb").write_text(json.dumps(nb), encoding="utf-8")

    open_notebook(page, lab, "edited.ipynb")
    page.wait_for_selector("#sdc-panel .sdc-Panel-footer:has-text('digests checked by the server')",
                           state="attached", timeout=60_000)
    output = page.locator(f'.sdc-Output[data-id="{edited}"]')
    output.wait_for()
    page.wait_for_function(
        "id => document.querySelector(`.sdc-Output[data-id='${id}']`).classList.contains('sdc-mod-overruled')",
        arg=edited)
    assert not output.locator(".sdc-Output-header").is_visible()  # the kernel's "cleared" header gives way
    output.scroll_into_view_if_needed()
    shot(page, "edited_output.png")
    row = page.locator(".jp-OutputArea-child", has=output).locator(".sdc-BadgeRow")
    row.wait_for()
    says = (row.get_attribute("title") or "") + " " + row.inner_text()
    assert "changed after it was checked" in says and "not cleared" in says, says
