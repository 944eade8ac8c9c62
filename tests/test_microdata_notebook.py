"""The row-level demo notebook runs headless, top to bottom, and reads as a safe path: its
summaries and prints are working notes (never exported, not failures), only the row-level view
is blocked."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from sdc_magic.jupyter.notebooks import execute, summarise

NOTEBOOK = Path(__file__).resolve().parent.parent / "demo_notebooks" / "04_row_level.ipynb"


@pytest.mark.notebook
def test_row_level_demo_runs(tmp_path: Path) -> None:
    source = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in source.cells if c.cell_type == "code"]
    assert code[0].source.strip() == "%load_ext sdc_magic"
    assert not any("%sdc" in c.source for c in code)  # public API only, no magics
    nb = execute(NOTEBOOK, tmp_path / "04.ipynb", cwd=tmp_path)
    rows = summarise(nb)
    assert [r for r in rows if r.output_type == "error"] == []
    blocked = [r for r in rows if r.kind == "row-level"]
    assert blocked and all(r.status == "blocked" for r in blocked)
    # every other output is the extension's message, printed text or a value marked as a note
    # (issue 24.7: no "not cleared" output a user would read as a failure)
    values = [r for r in rows if r.output_type in ("execute_result", "display_data") and r.kind != "row-level"]
    assert values and all(r.status in ("pass", "note") for r in values), [(r.cell, r.status) for r in values]
    assert [r for r in rows if r.status == "uncleared" and r.output_type != "stream"] == []
    assert sum(r.status == "note" for r in values) >= 4  # the dict summaries
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
                if o.output_type == "stream" and o.get("name") == "stderr"]  # no warning either
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    cert = json.loads(printed)
    assert cert["k_anonymous"] and cert["violations_after"] == 0 and cert["seed"] is None
