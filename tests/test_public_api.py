"""The public API never breaks itself (issue 12, item 12), and the README's examples run as written."""

from __future__ import annotations

import importlib
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


def _fresh_ledger(tmp_path: Path, persist: bool) -> None:
    """The example's session starts with an empty ledger, as a new notebook's does: the test
    process's kernel session has recorded every earlier test's outputs (exporting and verifying
    hundreds of them took two minutes)."""
    from sdc_magic.jupyter.kernel import session
    from sdc_magic.records.ledger import Ledger

    session().ledger = Ledger(folder=tmp_path / ".sdc_magic", persist=persist)


def test_readme_python_api_example_runs_with_the_extension(sdc: Any, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _fresh_ledger(tmp_path, persist=True)
    ran = sdc.run(_block_after("## Python API"))
    assert ran.tables[0][1]["sdc_magic"]["status"] in ("pass", "suppressed")  # display(table) was checked
    ledger = sdc.run("sdc_magic.ledger()").result
    assert isinstance(ledger, pd.DataFrame) and len(ledger) >= 1
    assert (tmp_path / "release" / "results.json").is_file()
    assert set(sdc.ns["result"].cells["status"]) >= {"primary", "secondary"}


def test_readme_python_api_example_runs_without_the_extension(shell: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _fresh_ledger(tmp_path, persist=False)
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


#: every import path the README, Jupyter configs or the console script name (issue 20: the
#: modules moved into stage sub-packages; old paths are the same module objects)
DOCUMENTED_PATHS = {
    "sdc_magic.extension": "sdc_magic.jupyter.extension",
    "sdc_magic.session": "sdc_magic.jupyter.session",
    "sdc_magic.redact": "sdc_magic.records.redact",
    "sdc_magic.cli": "sdc_magic.jupyter.cli",
    "sdc_magic.server": "sdc_magic.jupyter.server",
    "sdc_magic.ledger": "sdc_magic.records.ledger",
    "sdc_magic.export": "sdc_magic.records.export",
    "sdc_magic.verification": "sdc_magic.records.verification",
}


def test_documented_import_paths_work_in_a_fresh_interpreter() -> None:
    code = "\n".join([
        "import importlib, sys",
        f"paths = {DOCUMENTED_PATHS!r}",
        "for old, new in paths.items():",
        "    assert importlib.import_module(old) is importlib.import_module(new), old",
        "    assert sys.modules[new].__spec__.name == new, new",
        "from sdc_magic.extension import session",
        "from sdc_magic.redact import RedactPreprocessor, pre_save_hook",
        "from sdc_magic.cli import main",
        "from sdc_magic.datasets import make_referrals",
        "from sdc_magic.microdata import check_k_anonymity",
        "from sdc_magic.protect import protect, audit",
        "from sdc_magic import PRESETS, Rules, RulesError, preset, ledger, export, verify, __version__",
        "from sdc_magic import load_ipython_extension, unload_ipython_extension",
        "import sdc_magic",
        "assert callable(sdc_magic.ledger) and callable(sdc_magic.export), 'public functions survive'",
        "assert callable(session) and callable(main) and callable(pre_save_hook)",
        "print('ok')",
    ])
    env = {"SDC_MAGIC_CONFIG": "", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_python_m_of_the_old_cli_path_runs() -> None:
    env = {"SDC_MAGIC_CONFIG": "", "PATH": "/usr/bin:/bin"}
    for module in ("sdc_magic.cli", "sdc_magic.jupyter.cli"):
        done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0 and "verify" in done.stdout, (module, done.stderr[-2000:])


def test_jupyter_config_and_console_script_name_existing_objects() -> None:
    import json
    import tomllib

    root = Path(__file__).resolve().parents[1]
    script = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]["sdc-magic"]
    module, _, func = script.partition(":")
    assert callable(getattr(importlib.import_module(module), func))
    config = json.loads((root / "jupyter-config" / "server-config" / "sdc_magic.json").read_text())
    for name in config["ServerApp"]["jpserver_extensions"]:
        assert hasattr(importlib.import_module(name), "_load_jupyter_server_extension")


def test_every_dotted_path_the_readme_and_docs_name_resolves() -> None:
    """``sdc_magic.x.y`` in README.md and docs/*.md: a module, or a name in one (metadata keys aside)."""
    root = Path(__file__).resolve().parents[1]
    texts = [README.read_text(encoding="utf-8")] + [p.read_text(encoding="utf-8") for p in (root / "docs").glob("*.md")]
    paths = set()
    for text in texts:
        paths |= set(re.findall(r"(?<![\w.])(sdc_magic(?:\.[A-Za-z_]\w*)+)", text))
    assert len(paths) >= 8, sorted(paths)
    unresolved = []
    for path in sorted(paths):
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for name in parts[cut:]:
                    obj = getattr(obj, name)
            except AttributeError:
                unresolved.append(path)
            break
        else:
            unresolved.append(path)
    assert unresolved == [], unresolved
