"""Leak classes of issue 10 as a red-teamer would try them: in a real kernel.

The snippets (our own, not the held-out corpus) try to get the same small or individual
figure out by other statistics and reshaped copies. After executing the notebook we
check, for every output:

* the decision in ``metadata.sdc_magic`` hides the cells the rules require;
* no mime type of any output (whatever its status) carries an individual value that
  must stay hidden (the maximum 987,654 that dominates R3, R4's maximum 123,457, R3's
  standard deviation under the insee preset);
* the export folder (CSV, certificates, results.json, summary) and the redacted copy of
  the notebook carry none of them either, and ``sdc-magic verify`` accepts the folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _nbutil import execute_notebook, text_of
from test_statistics_semantics import DATA_SOURCE, make_leak_data

pytestmark = pytest.mark.notebook

SNIPPETS: list[tuple[str, dict]] = [
    ("d.groupby('region')['flag'].sum()", {"hide": {"R1", "R2"}}),
    ("d.groupby('region')['flag'].mean()", {"hide": {"R1", "R2"}}),
    ("d.groupby('region')['sick'].sum().to_frame('sick people')", {"hide": {"R1", "R2"}}),
    ("d.groupby('region')['hh'].nunique()", {"hide": {"R1"}}),
    ("d.groupby('region')['income'].quantile([0, .5, 1])", {"hide_any": True}),
    ("d.groupby('region')['income'].describe(percentiles=[0, .5, 1])", {"hide_any": True}),
    ("d.groupby('region')['income'].max().to_frame().T", {"hide_any": True}),
    ("d.groupby('region')['income'].quantile(1.0).reset_index()", {"hide_any": True}),
    ("%sdc preset insee", {}),
    ("d.groupby('region')['income'].agg(['count', 'mean', 'std'])", {"hide": {"R3"}}),
    ("d.groupby('region')['income'].std().round(0)", {"hide": {"R3"}}),
    ("d.groupby('region')['income'].var()", {"hide": {"R3"}}),
    ("%sdc preset humanitarian", {}),
    ("d.groupby('age').size()", {"status": {"review", "blocked"}}),
    ("d.groupby('cat').size().sort_values()", {"hide": {"C", "E"}, "last": True}),
    ("d.groupby(['region', 'cat']).size().groupby(level='cat').sum()", {"hide": {"C", "E"}}),
]
SECRETS_LITERAL = ["987654", "987,654", "123457", "123,457"]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("leaks")
    sources = ["%load_ext sdc_magic", DATA_SOURCE + "\nd = make_leak_data()"]
    sources += [code for code, _ in SNIPPETS]
    sources += ["%sdc export exp"]
    _, nb = execute_notebook(sources, work, name="leaks.ipynb", timeout=300)
    return work, nb


def _secrets(dominance: bool = False) -> list[str]:
    """Values that must never be shown; with ``dominance``, also R3's spread (the insee
    preset is in force for those snippets: its std and variance give 987,654 back)."""
    out = list(SECRETS_LITERAL)
    if dominance:
        d = make_leak_data()
        r3 = d[d.region == "R3"].income
        out.append(str(int(r3.std()))[:5])  # first 5 digits
        out.append(str(int(r3.var()))[:6])
    return out


def _under_insee() -> set[int]:
    """Notebook cell indexes of the snippets run under the insee preset."""
    codes = [code for code, _ in SNIPPETS]
    start, stop = codes.index("%sdc preset insee"), codes.index("%sdc preset humanitarian")
    return {2 + i for i in range(start + 1, stop)}


def _table_outputs(cell: dict) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.get("metadata", {}).get("sdc_magic", {}).get("kind") == "table"]


def _all_text(output: dict) -> str:
    parts = [text_of(v) for v in output.get("data", {}).values()]
    parts.append(text_of(output.get("text", "")))
    return "\n".join(parts)


def test_no_error_and_every_snippet_checked(executed):
    _, nb = executed
    cells = nb["cells"][2:2 + len(SNIPPETS)]
    for cell, (code, _) in zip(cells, SNIPPETS, strict=True):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{code}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        if code.startswith("%"):
            continue
        assert _table_outputs(cell), f"{code}: no checked table output"


def test_required_cells_hidden_and_status(executed):
    _, nb = executed
    cells = nb["cells"][2:2 + len(SNIPPETS)]
    for cell, (code, expect) in zip(cells, SNIPPETS, strict=True):
        if code.startswith("%"):
            continue
        meta = _table_outputs(cell)[0]["metadata"]["sdc_magic"]
        hidden_rows = {str(r["cell"][0]) for r in meta["reasons"] if r.get("hidden")}
        if "status" in expect:
            assert meta["status"] in expect["status"], (code, meta["status"])
            continue
        if meta["status"] == "blocked":
            continue  # nothing of it is published
        if "hide" in expect:
            missing = {lab for lab in expect["hide"] if not any(lab in h for h in hidden_rows)}
            assert not missing, f"{code}: {missing} not hidden ({meta['status']}, hidden: {hidden_rows})"
        if expect.get("hide_any"):
            assert meta["hidden"] > 0, f"{code}: extremes published"
        if expect.get("last"):
            positions = sorted(r["position"][0] for r in meta["reasons"] if r.get("hidden"))
            assert positions == list(range(meta["cells"] - len(positions), meta["cells"])), (code, positions)


def test_no_mime_type_carries_an_individual_value(executed):
    _, nb = executed
    insee = _under_insee()
    problems = []
    for k, cell in enumerate(nb["cells"]):
        if k < 2:
            continue  # the setup cell's source holds the planted values, its outputs none
        secrets = _secrets(dominance=k in insee)
        for output in cell.get("outputs", []):
            text = _all_text(output) + json.dumps(output.get("metadata", {}))
            for secret in secrets:
                if secret in text:
                    problems.append(f"cell {k} ({text_of(cell['source'])[:60]}): {secret!r} in an output")
    assert not problems, "\n".join(problems)


def test_export_folder_and_redacted_copy_carry_no_individual_value(executed):
    work, _ = executed
    secrets = _secrets()
    exported = [p for p in (work / "exp").rglob("*") if p.is_file()]
    assert any(p.suffix == ".csv" for p in exported), "nothing was exported"
    for path in exported:
        text = path.read_text(encoding="utf-8", errors="replace")
        for secret in secrets:
            assert secret not in text, f"{path.name} carries {secret!r}"
    verified = subprocess.run([sys.executable, "-m", "sdc_magic.jupyter.cli", "verify", str(work / "exp")],
                              capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    redacted = work / "redacted.ipynb"
    run = subprocess.run([sys.executable, "-m", "sdc_magic.jupyter.cli", "redact", str(work / "leaks.ipynb"), str(redacted)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    nb = json.loads(redacted.read_text(encoding="utf-8"))
    for k, cell in enumerate(nb["cells"]):
        if k < 2:
            continue
        for output in cell.get("outputs", []):
            text = _all_text(output)
            for secret in secrets:
                assert secret not in text, f"redacted copy, cell {k}: {secret!r}"
