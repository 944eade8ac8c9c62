"""The public API never breaks itself (issue 12, item 12), and the README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _block_after(heading: str) -> str:
    """The first ```python block of the README section starting at ``heading``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    found = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert found is not None, heading
    return found.group(1)


@pytest.mark.parametrize("submodules", [
    [], ["sdc_magic.ledger"], ["sdc_magic.export", "sdc_magic.verification"], ["sdc_magic.protect.api"],
    ["sdc_magic.extension", "sdc_magic.ledger", "sdc_magic.export", "sdc_magic.protect"],
])
def test_public_functions_survive_any_submodule_import(submodules: list[str], tmp_path: Path) -> None:
    """In a fresh interpreter: ``import sdc_magic.ledger`` used to replace ``sdc_magic.ledger()``."""
    code = "\n".join([
        *(f"import {m}" for m in submodules),
        "import pandas as pd, sdc_magic",
        "frame = sdc_magic.ledger()",
        "assert isinstance(frame, pd.DataFrame), type(frame)",
        "assert sdc_magic.verify('missing') != []",
        "cells = pd.DataFrame({'r': ['a', 'a', 'b', 'b'], 'c': ['x', 'y', 'x', 'y'], 'n': [1, 30, 30, 30]})",
        "result = sdc_magic.protect(cells, dims=['r', 'c'], value='n')",
        "assert result.audit_ok and (result.cells['status'] == 'primary').sum() == 1",
        "assert sdc_magic.ledger.Ledger and sdc_magic.export.ExportError and sdc_magic.protect.audit",
        "from sdc_magic.protect import protect, audit",
        "from sdc_magic.ledger import Ledger",
        "print('ok')",
    ])
    env = {"SDC_MAGIC_CONFIG": "", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]


def test_from_import_gives_the_callable_and_module_attributes() -> None:
    import sdc_magic.ledger  # noqa: F401  (the import that used to break the API)
    from sdc_magic import export, ledger, protect, verify

    assert callable(ledger) and callable(export) and callable(verify) and callable(protect)
    assert ledger.__name__ == "ledger" and "DataFrame" in (ledger.__doc__ or "")
    assert protect.protection_levels is sys.modules["sdc_magic.protect"].protection_levels


def test_readme_python_api_example_runs_with_the_extension(sdc: Any, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ran = sdc.run(_block_after("## Python API"))
    assert ran.tables[0][1]["sdc_magic"]["status"] in ("pass", "suppressed")  # display(table) was checked
    ledger = sdc.run("sdc_magic.ledger()").result
    assert isinstance(ledger, pd.DataFrame) and len(ledger) >= 1
    assert (tmp_path / "release" / "results.json").is_file()
    assert set(sdc.ns["result"].cells["status"]) >= {"primary", "secondary"}


def test_readme_python_api_example_runs_without_the_extension(shell: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shell.run(_block_after("## Python API"))
    assert isinstance(shell.ns["checked"].status, str)
    assert (tmp_path / "release" / "results.json").is_file()


def test_readme_ten_lines_run_as_written(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lines = [line for line in _block_after("## Ten lines").splitlines() if line.strip()]
    shown = []
    for line in lines:
        shown.append(shell.run(line))
    statuses = [r.meta["status"] for r in shown if r.tables]
    assert statuses[0] == "suppressed" and statuses[1] == "pass"
