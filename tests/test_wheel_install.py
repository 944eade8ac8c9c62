"""The wheel alone (issue 24.1): built from this checkout and installed in clean virtual
environments without any test extra, it protects tables.

* kernel only (``pip install sdc-magic ipykernel``: JupyterHub and TRE kernels are often set
  up apart from the server, with no jinja2): ``%load_ext sdc_magic`` works and a table with
  small cells comes out ``suppressed`` (secondary protection applied: HiGHS is a core
  dependency), never raw and never "secondary protection not yet applied";
* with JupyterLab: the server extension and the lab extension are enabled by the install.

Slow (two environments from PyPI, a few minutes): marked ``wheel``; ``make test`` runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.wheel

KERNEL_SCRIPT = """
import importlib.util, json
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "sdc_magic")
from sdc_magic.datasets import make_referrals
from sdc_magic.jupyter.kernel import session
shell.user_ns["referrals"] = make_referrals()
shell.run_cell("referrals.groupby(['admin2', 'case_category', 'sex']).size()")
record = session().ledger.records[-1]
print("RESULT " + json.dumps({"status": record.status, "hidden": record.hidden,
                              "jinja2": importlib.util.find_spec("jinja2") is not None}))
"""


def _run(*command: object, cwd: Path | None = None, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=env)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / "sdc_magic" / "labextension" / "static" / "style.js").exists():
        pytest.fail("the lab extension is not built (make builds it before the tests)")
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT)
    (found,) = out.glob("sdc_magic-*.whl")
    return found


def _venv(path: Path, *packages: object) -> Path:
    _run(sys.executable, "-m", "venv", path)
    python = path / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", *packages)
    return python


def _kernel_result(python: Path, cwd: Path) -> dict:
    import json

    done = _run(python, "-c", KERNEL_SCRIPT, cwd=cwd)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_kernel_only_install_protects_tables(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "kernel", wheel, "ipykernel")
    result = _kernel_result(python, tmp_path)
    assert result["status"] == "suppressed" and result["hidden"] > 0, result
    assert result["jinja2"] is False  # the case that used to show every table raw


def test_with_jupyterlab_both_extensions_are_enabled(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "lab", wheel, "jupyterlab")
    jupyter = python.parent / "jupyter"
    server = _run(jupyter, "server", "extension", "list")
    text = server.stdout + server.stderr
    assert "sdc_magic" in text and "enabled" in text.split("sdc_magic", 1)[1][:80], text
    lab = _run(jupyter, "labextension", "list")
    text = lab.stdout + lab.stderr
    assert "sdc-magic" in text and "enabled" in text.split("sdc-magic", 1)[1][:80], text
    assert _kernel_result(python, tmp_path)["status"] == "suppressed"
