"""The user's files are never modified or deleted by ``sdc-magic redact``, ``sdc-magic run`` or
``%sdc export --force`` (red team 53b, findings 09, 14 and 16).

Why these tests exist: ``sdc-magic redact nb.ipynb nb.ipynb`` rewrote the analyst's notebook in
place (prints, errors and blocked tables gone for good), ``sdc-magic redact nb.ipynb notes.txt``
replaced an unrelated file, ``sdc-magic run nb.ipynb --out .`` wrote the executed copy over the
source, and two headless notebooks shared ``build/export/session`` so that one notebook's
``%sdc export --force`` deleted the other's export.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import nbformat
import pytest

from sdc_magic.jupyter.cli import main
from sdc_magic.records.export import ExportError, default_export_folder
from sdc_magic.records.verification import verify

export_mod = importlib.import_module("sdc_magic.records.export")


def _notebook(path: Path, text: str = "my working notes") -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('x')")
    cell.outputs = [nbformat.v4.new_output("stream", text=text + "\n")]
    nb.cells = [cell]
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------------------ redact (finding 09)
@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "hardlink"])
def test_redact_refuses_to_write_over_its_source(tmp_path: Path, spelling: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    source = _notebook(tmp_path / "analysis.ipynb")
    before = source.read_bytes()
    target = {"same": source, "dotted": tmp_path / "sub" / ".." / "analysis.ipynb",
              "symlink": tmp_path / "link.ipynb", "hardlink": tmp_path / "hard.ipynb"}[spelling]
    if spelling == "dotted":
        (tmp_path / "sub").mkdir()
    elif spelling == "symlink":
        target.symlink_to(source)
    elif spelling == "hardlink":
        os.link(source, target)
    for extra in ([], ["--force"]):  # never the source, not even with --force
        code = main(["redact", str(source), str(target), *extra])
        err = capsys.readouterr().err
        assert code != 0
        assert "source" in err and "Traceback" not in err
        assert source.read_bytes() == before


def test_redact_refuses_an_existing_target_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _notebook(tmp_path / "analysis.ipynb")
    notes = tmp_path / "notes.txt"
    notes.write_text("important notes")
    assert main(["redact", str(source), str(notes)]) != 0
    err = capsys.readouterr().err
    assert "notes.txt" in err and "--force" in err
    assert notes.read_text() == "important notes"
    # an explicit --force replaces it (the user said so); the source stays as it was
    assert main(["redact", str(source), str(notes), "--force"]) == 0
    assert "my working notes" not in notes.read_text()
    assert "my working notes" in source.read_text()


def test_redact_to_a_new_file_still_works(tmp_path: Path) -> None:
    source = _notebook(tmp_path / "analysis.ipynb")
    assert main(["redact", str(source), str(tmp_path / "clean.ipynb")]) == 0
    assert "my working notes" not in (tmp_path / "clean.ipynb").read_text()


def test_redact_refuses_a_folder_as_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _notebook(tmp_path / "analysis.ipynb")
    (tmp_path / "out").mkdir()
    assert main(["redact", str(source), str(tmp_path / "out"), "--force"]) != 0
    assert "folder" in capsys.readouterr().err and (tmp_path / "out").is_dir()


# ------------------------------------------------------------------ run --out (finding 16)
@pytest.mark.parametrize("out", [".", "same folder spelled differently"])
def test_run_refuses_to_write_the_executed_copy_over_the_source(tmp_path: Path, out: str,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    source = _notebook(tmp_path / "nb.ipynb", "interactive result I wanted to keep")
    before = source.read_bytes()
    folder = "." if out == "." else str(tmp_path / "x" / "..")
    (tmp_path / "x").mkdir()
    code = main(["run", "nb.ipynb", "--out", folder])
    err = capsys.readouterr().err
    assert code != 0 and "nb.ipynb" in err and "Traceback" not in err
    assert source.read_bytes() == before


# ------------------------------------------------------------------ export --force (finding 14)
@pytest.fixture
def published(session, referrals):
    session.publish(referrals.groupby("sex").size())  # pass
    return session


def test_force_never_deletes_another_kernels_unnamed_export(published, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """No notebook name (nbclient, a console, a script): the default folder is shared, so an
    export made by another kernel is never replaced; the message says why and what to do."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    published.export(None)  # notebook A's kernel
    folder = default_export_folder()
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    monkeypatch.setattr(export_mod, "KERNEL", "0badc0de")  # notebook B's kernel, same folder
    with pytest.raises(ExportError, match="another kernel") as err:
        published.export(None, force=True)
    assert "Nothing was deleted" in str(err.value)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert verify(folder) == []


def test_force_replaces_this_kernels_own_unnamed_export(published, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    published.export(None)
    published.export(None, force=True)
    assert verify(default_export_folder()) == []


def test_force_never_replaces_another_notebooks_export(published, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "shared"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "A.ipynb"))
    published.export(folder)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "B.ipynb"))
    with pytest.raises(ExportError, match="notebook 'A'") as err:
        published.export(folder, force=True)
    assert "Nothing was deleted" in str(err.value) and verify(folder) == []
    # an unnamed kernel cannot tell either: refused too
    monkeypatch.delenv("JPY_SESSION_NAME")
    with pytest.raises(ExportError):
        published.export(folder, force=True)


def test_force_replaces_the_same_notebooks_export_after_a_restart(published, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Restart & Run All: the same notebook, a new kernel, replaces its own earlier export."""
    folder = tmp_path / "mine"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "A.ipynb"))
    published.export(folder)
    monkeypatch.setattr(export_mod, "KERNEL", "5eed5eed")
    published.export(folder, force=True)
    assert verify(folder) == []


def test_force_refuses_an_export_that_names_no_owner(published, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An export whose manifest does not say which notebook made it (an earlier version) is
    not deleted: nobody can tell whose it is."""
    import json

    from sdc_magic.records.layout import MANIFEST

    folder = tmp_path / "old"
    published.export(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest.pop("owner")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match="Nothing was deleted"):
        published.export(folder, force=True)
    assert (folder / "results.json").exists()
