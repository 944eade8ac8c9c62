"""Forged clearances: a hand-edited output with ``status: pass`` and a self-computed digest.

The digest alone cannot tell it from a real one; the session ledger (``--ledger``) and the
installation's HMAC key (``--require-hmac``) can.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest

from sdc_magic.jupyter.cli import main
from sdc_magic.outputs.bundle import digest
from sdc_magic.records import signing
from sdc_magic.records.ledger import Ledger, OutputRecord
from sdc_magic.records.redact import (
    RedactPreprocessor,
    clearance,
    ledger_clearances,
    pre_save_hook,
    redact_notebook,
)

SECRET = "Leogane F 60+: 3"


def output(page: str, plain: str, status: str = "pass", sign: bool = False) -> dict[str, Any]:
    d = digest(page, plain)
    meta: dict[str, Any] = {"status": status, "digest": d}
    if sign:
        meta["hmac"] = signing.sign(d, status)
    return {"output_type": "display_data", "data": {"text/html": page, "text/plain": plain},
            "metadata": {"sdc_magic": meta}}


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "sdc_magic" / "key"
    monkeypatch.setenv(signing.KEY_ENV, str(path))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    signing._cache.clear()
    return path


@pytest.fixture
def notebook_dir(tmp_path: Path) -> Path:
    """A notebook whose kernel recorded one cleared and one review output; plus a forged one."""
    folder = tmp_path / "project"
    folder.mkdir()
    ledger = Ledger(folder / ".sdc_magic")
    real = output("<table><td>28</td></table>", "28")
    review = output("<table><td>?</td></table>", "?", status="review")
    for out, status in ((real, "pass"), (review, "review")):
        ledger.add(OutputRecord(id=ledger.new_id(), status=status, kind="table", hidden=0, cells=1, call="size",
                                digest=out["metadata"]["sdc_magic"]["digest"], execution_count=1))
    review["metadata"]["sdc_magic"]["status"] = "pass"  # relabelled by hand
    forged = output(f"<table><td>{SECRET}</td></table>", SECRET)  # typed in, digest recomputed
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("t")]
    nb.cells[0].outputs = [nbformat.from_dict(o) for o in (real, forged, review)]
    nbformat.write(nb, folder / "analysis.ipynb")
    return folder


def test_digest_alone_keeps_a_forged_output(notebook_dir: Path) -> None:
    nb = nbformat.read(notebook_dir / "analysis.ipynb", as_version=4)
    assert [clearance(o) for o in nb.cells[0].outputs] == [None, None, None]  # why --ledger is needed


def test_ledger_keeps_only_what_the_session_cleared(notebook_dir: Path) -> None:
    known = ledger_clearances(notebook_dir / ".sdc_magic" / "ledger.jsonl")
    nb = nbformat.read(notebook_dir / "analysis.ipynb", as_version=4)
    assert [clearance(o, known_digests=known) for o in nb.cells[0].outputs] == [
        None, "not in the session ledger", "not cleared in the session ledger"]


@pytest.mark.parametrize("ledger", ["path", "auto"])
def test_cli_redact_with_ledger(notebook_dir: Path, ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = notebook_dir / "clean.ipynb"
    arg = str(notebook_dir / ".sdc_magic" / "ledger.jsonl") if ledger == "path" else "auto"
    assert main(["redact", str(notebook_dir / "analysis.ipynb"), str(target), "--ledger", arg]) == 0
    text = target.read_text()
    assert SECRET not in text and "kept 1 output(s), removed 2" in capsys.readouterr().out


def test_cli_refuses_an_unreadable_ledger(notebook_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = notebook_dir / "clean.ipynb"
    code = main(["redact", str(notebook_dir / "analysis.ipynb"), str(target), "--ledger", str(notebook_dir / "no")])
    assert code == 2 and not target.exists() and "cannot read the ledger" in capsys.readouterr().err


def test_preprocessor_and_pre_save_hook_take_the_ledger(notebook_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook_dir / "analysis.ipynb", as_version=4)
    RedactPreprocessor(ledger=str(notebook_dir / ".sdc_magic" / "ledger.jsonl")).preprocess(nb, {})
    assert SECRET not in json.dumps(nb) and "28" in json.dumps(nb)

    class Manager:
        def _get_os_path(self, path: str) -> str:
            return str(notebook_dir / path)

    model = {"type": "notebook", "content": json.loads((notebook_dir / "analysis.ipynb").read_text())}
    monkeypatch.setenv("SDC_MAGIC_REDACT_LEDGER", "auto")
    pre_save_hook(model, path="analysis.ipynb", contents_manager=Manager())
    outputs = model["content"]["cells"][0]["outputs"]
    assert SECRET not in json.dumps(model) and "sdc_magic" in outputs[0]["metadata"]
    # a notebook whose ledger cannot be found keeps nothing (fail closed)
    model = {"type": "notebook", "content": json.loads((notebook_dir / "analysis.ipynb").read_text())}
    monkeypatch.setenv("SDC_MAGIC_REDACT_LEDGER", str(notebook_dir / "missing.jsonl"))
    pre_save_hook(model, path="analysis.ipynb")
    assert all("sdc_magic" not in o["metadata"] for o in model["content"]["cells"][0]["outputs"])


def test_hmac_signed_outputs_only(key_file: Path) -> None:
    good = output("<table><td>28</td></table>", "28", sign=True)
    assert key_file.is_file() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert len(good["metadata"]["sdc_magic"]["hmac"]) == 64
    forged = output(f"<table><td>{SECRET}</td></table>", SECRET)
    relabelled = output("<table><td>?</td></table>", "?", status="review", sign=True)
    relabelled["metadata"]["sdc_magic"]["status"] = "pass"
    copied = output(f"<table><td>{SECRET}</td></table>", SECRET)
    copied["metadata"]["sdc_magic"]["hmac"] = good["metadata"]["sdc_magic"]["hmac"]  # a signature from elsewhere
    assert clearance(good, require_hmac=True) is None
    for bad in (forged, relabelled, copied):
        assert clearance(bad, require_hmac=True) == "no valid signature"
    nb = {"cells": [{"cell_type": "code", "outputs": [good, forged, relabelled, copied]}], "metadata": {}}
    report = redact_notebook(nb, require_hmac=True)
    assert (report.kept, report.removed) == (1, 3) and SECRET not in json.dumps(nb)


def test_another_installation_cannot_check_the_signature(key_file: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    good = output("<table><td>28</td></table>", "28", sign=True)
    monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "elsewhere" / "key"))
    assert clearance(good, require_hmac=True) == "no valid signature"  # no key there: fail closed
    signing.sign("x", "pass")  # that installation's own key
    assert clearance(good, require_hmac=True) == "no valid signature"


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_a_key_others_can_read_is_not_used(key_file: Path) -> None:
    assert signing.sign("d", "pass") is not None
    key_file.chmod(0o644)
    signing._cache.clear()
    assert signing.sign("d", "pass") is None
    good = output("<table><td>28</td></table>", "28")
    good["metadata"]["sdc_magic"]["hmac"] = "0" * 64
    assert clearance(good, require_hmac=True) == "no valid signature"


@pytest.mark.notebook
def test_real_kernel_outputs_pass_the_ledger_check_and_forgeries_do_not(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the digests a kernel writes into the notebook are the ones its ledger holds."""
    import tempfile

    from sdc_magic.jupyter import notebooks
    from sdc_magic.jupyter.notebooks import execute

    ledger_dir = tmp_path / ".sdc_magic"  # where a kernel started beside the notebook keeps its ledger
    ledger_dir.mkdir()
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(notebooks.tempfile, "mkdtemp",
                        lambda prefix="", **kw: str(ledger_dir) if prefix == "sdc-ledger-" else real_mkdtemp(prefix, **kw))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "%load_ext sdc_magic",
        "from sdc_magic.datasets import make_referrals\nreferrals = make_referrals()",
        "referrals.groupby(['admin2', 'case_category']).size().unstack()",
        "referrals.groupby(['admin2', 'sex', 'age_band']).size().unstack()",
    )]
    source = tmp_path / "analysis.ipynb"
    nbformat.write(nb, source)
    execute(source, source, cwd=tmp_path)
    raw = json.loads(source.read_text())
    tables = [o for c in raw["cells"] for o in c.get("outputs", [])
              if (o.get("metadata") or {}).get("sdc_magic", {}).get("kind") == "table"]
    assert [o["metadata"]["sdc_magic"]["status"] for o in tables] == ["pass", "suppressed"]
    # forge: the suppressed table's text with a hidden cell filled in, status and digest recomputed
    forged = json.loads(json.dumps(tables[1]))
    forged["data"] = {"text/plain": f"{SECRET}", "text/html": f"<p>{SECRET}</p>"}
    forged["metadata"]["sdc_magic"]["digest"] = digest(f"<p>{SECRET}</p>", SECRET)
    raw["cells"][3]["outputs"].append(forged)
    source.write_text(json.dumps(raw))
    target = tmp_path / "clean.ipynb"
    assert main(["redact", str(source), str(target), "--ledger", "auto"]) == 0
    clean = json.loads(target.read_text())
    kept = [o for c in clean["cells"] for o in c.get("outputs", []) if "sdc_magic" in (o.get("metadata") or {})]
    assert [o["metadata"]["sdc_magic"]["status"] for o in kept
            if o["metadata"]["sdc_magic"].get("kind") == "table"] == ["pass", "suppressed"]
    assert SECRET not in target.read_text()
    assert "not in the session ledger" in target.read_text()
