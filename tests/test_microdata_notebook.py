"""The row-level demo notebook runs headless, top to bottom, in under a minute."""

from __future__ import annotations

import json
import time
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
    t0 = time.perf_counter()
    nb = execute(NOTEBOOK, tmp_path / "04.ipynb", cwd=tmp_path)
    assert time.perf_counter() - t0 < 60
    rows = summarise(nb)
    assert [r for r in rows if r.output_type == "error"] == []
    blocked = [r for r in rows if r.kind == "row-level"]
    assert blocked and all(r.status == "blocked" for r in blocked)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    cert = json.loads(printed)
    assert cert["k_anonymous"] and cert["violations_after"] == 0 and cert["seed"] is None
