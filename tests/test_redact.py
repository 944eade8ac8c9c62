"""Notebook redaction: only outputs with a valid clearance survive."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from sdc_magic.jupyter.cli import main
from sdc_magic.jupyter.notebooks import execute
from sdc_magic.records.redact import clearance, redact_notebook

CELLS = [
    "%load_ext sdc_magic",
    "import pandas as pd\nfrom sdc_magic.datasets import make_referrals\nreferrals = make_referrals()",
    "referrals.groupby(['admin2', 'case_category']).size().unstack()",  # cleared
    "referrals.groupby(['admin2', 'case_category', 'age_band', 'sex']).size()",  # hidden cells
    "print(referrals.groupby(['admin2', 'case_category', 'age_band', 'sex']).size().to_string())",  # raw print
    "referrals.head(5)",  # row-level
    "referrals['case_id'].tolist()[:5]",  # a list: not checked
    "raise ValueError(referrals.loc[0, 'case_id'])",  # an error quoting data
    "from IPython.display import display, Image\n"
    "display({'image/png': 'iVBORw0KGgo=', 'text/plain': referrals.loc[1, 'case_id'] + ' plot'}, raw=True)",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("redact")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    source = folder / "raw.ipynb"
    nbformat.write(nb, source)
    execute(source, source, cwd=folder)
    return source, json.loads(source.read_text())


@pytest.mark.notebook
def test_redaction_leaves_no_raw_value(executed, tmp_path: Path) -> None:
    source, raw = executed
    raw_text = json.dumps(raw)
    assert "C0001" in raw_text  # the raw notebook does leak (print, row-level view, list, error)
    target = tmp_path / "clean.ipynb"
    assert main(["redact", str(source), str(target)]) == 0
    clean = json.loads(target.read_text())
    text = json.dumps(clean)
    sources = "".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                      for c in clean["cells"])
    assert "C000" not in sources
    assert "C0001" not in text and "C0002" not in text
    assert "metadata" in clean and "widgets" not in clean["metadata"]
    kept = [o for c in clean["cells"] for o in c.get("outputs", []) if "sdc_magic" in o.get("metadata", {})
            and o["metadata"]["sdc_magic"].get("kind") != "message"]  # the banner: a cleared message
    statuses = sorted(o["metadata"]["sdc_magic"]["status"] for o in kept)
    assert statuses in (["pass"], ["pass", "suppressed"])
    # the 4-way table's small cells: only the protected rendering survives, if anything
    for o in kept:
        if o["metadata"]["sdc_magic"]["status"] != "pass":
            assert "✕" in "".join(o["data"]["text/plain"])


def test_forged_or_edited_outputs_are_removed() -> None:
    from sdc_magic.outputs.bundle import digest

    page, plain = "<table><td>1</td></table>", "1"
    good = {"output_type": "display_data", "data": {"text/html": page, "text/plain": plain},
            "metadata": {"sdc_magic": {"status": "pass", "digest": digest(page, plain)}}}
    assert clearance(good) is None
    edited = json.loads(json.dumps(good))
    edited["data"]["text/plain"] = "2"
    assert clearance(edited) == "digest does not match the content"
    blocked = json.loads(json.dumps(good))
    blocked["metadata"]["sdc_magic"]["status"] = "blocked"
    assert clearance(blocked) == "status blocked"
    latex = json.loads(json.dumps(good))
    latex["data"]["text/latex"] = "1"
    assert "unchecked mime types" in clearance(latex)
    assert clearance({"output_type": "stream", "text": "x"}) == "stream output"
    nb = {"cells": [{"cell_type": "code", "outputs": [good, edited]}], "metadata": {"widgets": {"x": 1}}}
    report = redact_notebook(nb, known_digests={digest(page, plain)})
    assert (report.kept, report.removed, report.widget_state_dropped) == (1, 1, True)
    assert redact_notebook({"cells": [{"cell_type": "code", "outputs": [good]}]}, known_digests=set()).removed == 1
