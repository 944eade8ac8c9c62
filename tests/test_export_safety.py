"""``--force`` replaces only what an earlier export wrote; re-runs and folders per notebook."""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import re
from pathlib import Path

import pytest

from sdc_magic.records.export import MANIFEST, ExportError, default_export_folder, export
from sdc_magic.records.ledger import Ledger
from sdc_magic.records.verification import verify

export_mod = importlib.import_module("sdc_magic.records.export")  # the module (sdc_magic.records.export is the public function)


@pytest.fixture
def published(session, referrals):
    session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())  # pass
    session.publish(referrals.groupby("sex").size())  # pass
    return session


def test_force_never_deletes_the_analysts_files(published, tmp_path: Path) -> None:
    """``%sdc export . --force`` in the notebook's folder used to unlink the notebook and the data."""
    user_files = {"analysis.ipynb": "{}", "microdata.csv": "id,age\n1,34\n", "notes.md": "to do",
                  "sub/keep.csv": "x"}
    for name, text in user_files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    with pytest.raises(ExportError) as err:
        published.export(tmp_path, force=True)
    message = str(err.value)
    for name in ("analysis.ipynb", "microdata.csv", "notes.md", "sub/keep.csv"):
        assert name in message
    assert "Nothing was deleted" in message
    for name, text in user_files.items():
        assert (tmp_path / name).read_text() == text
    assert not (tmp_path / "results.json").exists()


def test_force_replaces_an_earlier_export_only(published, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    published.export(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["complete"] and "out-1.csv" in manifest["files"] and "checksums/out-1.csv.txt" in manifest["files"]
    published.export(folder, force=True)
    assert verify(folder) == []
    (folder / "my notes.txt").write_text("mine")  # the analyst adds a file
    with pytest.raises(ExportError, match=r"my notes\.txt"):
        published.export(folder, force=True)
    (folder / "my notes.txt").unlink()
    (folder / "out-1.csv").write_text("edited by hand")  # or edits one the export wrote
    with pytest.raises(ExportError, match=r"out-1\.csv"):
        published.export(folder, force=True)
    assert (folder / "out-1.csv").read_text() == "edited by hand"


def test_an_interrupted_export_can_be_replaced(published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "export"

    def disk_full(path: Path, csv_text: str) -> None:
        path.write_text("partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_mod, "_write_xlsx", disk_full)
    with pytest.raises(ExportError, match="No space left"):
        published.export(folder, xlsx=True)
    monkeypatch.undo()
    published.export(folder, force=True)
    assert verify(folder) == []
    assert not (folder / "out-1.xlsx").exists()


@pytest.mark.parametrize("where", ["file", "parent is a file"])
def test_export_to_a_file_is_a_clear_error(published, tmp_path: Path, where: str) -> None:
    target = tmp_path / "report.txt"
    target.write_text("mine")
    path = target if where == "file" else target / "export"
    with pytest.raises(ExportError, match=r"report\.txt"):
        published.export(path, force=True)
    assert target.read_text() == "mine"


def test_magic_reports_a_file_target_without_a_traceback(sdc, tmp_path: Path) -> None:
    from sdc_magic.config import RulesError

    (tmp_path / "taken").write_text("x")
    with pytest.raises(RulesError, match="is a file"):
        sdc.magic(f"sdc export {tmp_path / 'taken'}")


def test_rerun_cells_export_only_their_latest_outputs(published, tmp_path: Path) -> None:
    """Restart & Run All: the export holds what the notebook shows now, not the stale runs."""
    first, second = published.outputs
    ledger = Ledger(persist=False)
    runs = [(first, "cell-a", 1), (second, "cell-b", 2), (first, "cell-a", 3), (second, "cell-b", 4)]
    for n, (rec, cell, count) in enumerate(runs, start=1):
        again = copy.copy(rec)
        again.id, again.cell_id, again.execution_count = f"out-{n}", cell, count
        again.certificate = {**rec.certificate, "id": again.id, "file": f"{again.id}.csv"}
        ledger.add(again)
    written = export(ledger.records, tmp_path / "x", {})
    assert [r.id for r in written] == ["out-3", "out-4"]
    assert [r.superseded_by for r in ledger.records] == ["out-3", "out-4", None, None]
    assert len(ledger.records) == 4  # the history stays in the ledger
    assert verify(tmp_path / "x") == []
    # a front-end that knows which outputs the notebook holds (a cell was deleted) can say so
    assert [r.id for r in export(ledger.records, tmp_path / "y", {}, only=["out-4", "out-1"])] == ["out-4"]


def test_default_folder_is_one_per_notebook(published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "My analysis.ipynb"))
    named = f"My_analysis-{hashlib.sha256(b'My analysis').hexdigest()[:8]}"  # a space: a hash (issue 23.10)
    assert default_export_folder() == tmp_path / "build" / "export" / named
    written = export(published.outputs, None, published.rules.as_dict())
    assert len(written) == 2 and verify(tmp_path / "build" / "export" / named) == []
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "other.ipynb"))
    assert default_export_folder() == tmp_path / "build" / "export" / "other"
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert default_export_folder() == tmp_path / "build" / "export" / "session"


def test_a_certificate_that_publishes_more_than_the_table_is_not_exported(published, tmp_path: Path) -> None:
    """E.g. a rounded table whose certificate kept exact values, or a cell a later audit hid."""
    published.export(tmp_path / "earlier")
    record = published.outputs[0]
    leaky = copy.deepcopy(record.certificate)
    leaky["published"][0]["value"] = leaky["published"][0]["value"] + 2  # what the CSV does not show
    record.certificate = leaky
    folder = tmp_path / "export"
    left_out: list[str] = []
    written = published.export(folder, left_out=left_out)  # the others are exported (issue 23.9)
    assert record.id not in [r.id for r in written] and len(written) == len(published.outputs) - 1
    assert re.search(r"out-1: out-1\.csv: cell .* differs from its certificate", left_out[0])
    assert not (folder / "out-1.csv").exists() and verify(folder) == []
    for other in published.outputs[1:]:
        other.dropped = True  # only the leaky output left: nothing is exported, the earlier export stays
    with pytest.raises(ExportError, match="nothing was exported"):
        published.export(tmp_path / "earlier", force=True)
    assert verify(tmp_path / "earlier") == []  # the earlier export is untouched


def test_rounded_tables_never_export_exact_values(session, referrals, tmp_path: Path) -> None:
    session.set_rules(round_to=5)
    session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())
    record = session.outputs[0]
    shown = {v for line in record.csv.splitlines()[1:] for v in line.split(",")[1:]}
    certified = {str(c["value"]) for c in record.certificate["published"]}
    if certified <= shown:  # the certificate publishes only what the table shows
        session.export(tmp_path / "x")
        assert verify(tmp_path / "x") == []
    else:
        with pytest.raises(ExportError, match="differs from its certificate"):
            session.export(tmp_path / "x")


def test_magic_errors_are_one_line_and_still_errors(tmp_path: Path, monkeypatch) -> None:
    """A bad rule or export line prints one line (no traceback), stops the cell, writes nothing."""
    import subprocess
    import sys

    code = """
import os
os.environ["SDC_MAGIC_CONFIG"] = ""
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "sdc_magic")
for line in ("%sdc rules threshold=ten", "%sdc export my dir", "%sdc export out --frce"):
    result = shell.run_cell(line)
    print("ERROR", type(result.error_in_exec).__name__)
shell.run_line_magic("unload_ext", "sdc_magic")
print("HANDLERS", shell.custom_exceptions)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "SDC_MAGIC_CONFIG": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("ERROR RulesError") == 3, done.stdout
    assert "Traceback" not in done.stderr and "threshold must be a whole number, got 'ten'" in done.stderr
    assert 'quote a folder with spaces' in done.stderr
    assert "HANDLERS ()" in done.stdout, "unloading restores IPython's handlers"
    assert not (tmp_path / "my").exists() and not (tmp_path / "out").exists()
