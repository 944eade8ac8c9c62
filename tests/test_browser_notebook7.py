"""The inline output in Jupyter Notebook 7 (the same lab extension, Notebook's own shell).

Runs only where the ``notebook`` package (7.x) is installed: it is not a dependency of
sdc_magic. In Debian's chromium, driven by Playwright, like ``test_browser.py``.
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
from test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO,
    SCREENSHOTS,
    last_screenshot,
    new_page,
    payloads,
    source_of,
    wait_kernel_idle,
)
from test_server import TOKEN, Jupyter, start_jupyter

pytestmark = pytest.mark.browser
notebook = pytest.importorskip("notebook", reason="Jupyter Notebook 7 is not installed (pip install 'notebook>=7')")
if not str(getattr(notebook, "__version__", "0")).startswith("7."):
    pytest.skip("Jupyter Notebook 7 is needed", allow_module_level=True)

NB = ".jp-Notebook"
OUTPUTS = f"{NB} .sdc-Output"


@pytest.fixture(scope="module")
def nb7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    base = tmp_path_factory.mktemp("nb7")
    root = base / "root"
    root.mkdir()
    shutil.copy(REPO / "demo_notebooks" / "02_better_answers.ipynb", root / "better.ipynb")
    settings = base / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false"}), encoding="utf-8")
    kernel_dir = base / "data" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python",
        "env": {"SDC_MAGIC_CONFIG": "", "PYTHONHASHSEED": "0"},
    }), encoding="utf-8")
    env = {"JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
           "JUPYTER_PATH": str(base / "data")}
    server = start_jupyter(base, root, "notebook", env=env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 950}, accept_downloads=True)
        pg = new_page(context)
        try:
            yield pg
        finally:
            last_screenshot(pg, "notebook7")
            browser.close()


def _menu(page: Any, top: str, command: str) -> None:
    page.locator(".lm-MenuBar-item", has_text=re.compile(rf"^{top}$")).click()
    page.locator(f'.lm-Menu-item[data-command="{command}"]').first.click()


def test_notebook7_inline_output_use_this_and_exception(nb7: Jupyter, page: Any) -> None:
    page.goto(f"{nb7.url}/notebooks/better.ipynb?token={TOKEN}")
    page.wait_for_selector(NB)
    wait_kernel_idle(nb7)
    _menu(page, "Run", "runmenu:run-all")
    page.wait_for_function(
        """() => {
          const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')];
          return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""", timeout=120_000)
    wait_kernel_idle(nb7)
    page.wait_for_function(f"() => document.querySelectorAll('{OUTPUTS}').length >= 3")
    assert page.locator(f"{OUTPUTS} td.sdc-Hidden").count() > 0
    # no status bar in Notebook 7: the notebook's toolbar says how many outputs are not cleared,
    # and a click (or Enter) opens the disclosure panel (issue 24.4)
    item = page.locator(".jp-NotebookPanel-toolbar .sdc-ToolbarItem")
    page.wait_for_function(
        "() => /sdc: \\d+ cleared/.test(document.querySelector('.sdc-ToolbarItem')?.textContent || '')")
    assert re.search(r"sdc: \d+ cleared", item.inner_text()), item.inner_text()
    item.click()
    page.wait_for_selector("#sdc-panel", state="visible")
    assert "cleared" in page.locator("#sdc-panel").inner_text()
    text = page.locator(NB).inner_text()
    assert "model not found" not in text and "Error displaying widget" not in text

    # "Use this" inserts below the output's cell, selected
    output = page.locator(f'{OUTPUTS}[data-status="suppressed"]').filter(has=page.locator(".sdc-Suggestion")).first
    cell_index = output.evaluate(
        "e => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].indexOf(e.closest('.jp-Cell'))")
    n_cells = page.locator(f"{NB} .jp-Cell").count()
    suggestion = output.locator(".sdc-Suggestion").first
    code = suggestion.locator(".sdc-Suggestion-code").input_value()
    suggestion.locator(".sdc-Suggestion-use").click()
    page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n + 1", arg=n_cells)
    new_cell = page.locator(f"{NB} .jp-Cell").nth(cell_index + 1)
    assert "jp-mod-active" in (new_cell.get_attribute("class") or "")
    assert new_cell.locator(".cm-content").inner_text().strip() == code.strip()

    # an exception request: the output says needs review
    out_id = output.get_attribute("data-id")
    output.locator("details.sdc-Output-exception > summary").click()
    output.locator(".sdc-Output-reason").fill("Needed for the district planning meeting")
    output.locator(".sdc-Output-request").click()
    page.locator(f'{OUTPUTS}[data-id="{out_id}"][data-status="review"]').wait_for()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "notebook7.png"))

    # saved, then reopened: the tables render from the saved data
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    path = nb7.root / "better.ipynb"
    deadline = time.monotonic() + 15
    while True:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # being written
            saved = {"cells": []}
        by_id = payloads(saved)
        if by_id.get(out_id, (0, {}))[1].get("status") == "review" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert by_id[out_id][1]["status"] == "review"
    assert source_of(saved["cells"][cell_index + 1]).strip() == code.strip()
    drawn = page.locator(OUTPUTS).count()
    page.reload()
    page.wait_for_function(f"n => document.querySelectorAll('{OUTPUTS}').length === n", arg=drawn)
    assert page.locator(f'{OUTPUTS}[data-id="{out_id}"][data-status="review"]').count() == 1
    # Notebook 7.6 itself throws "Cannot read properties of undefined (reading 'schema')" from its
    # shortcuts plugin on every load, also with sdc-magic disabled (measured): not ours.
    errors = [m for m in page.console_messages if (m.startswith("pageerror") and "reading 'schema'" not in m)
              or "model not found" in m]
    assert not errors, errors
