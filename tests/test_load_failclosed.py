"""Loading never leaves tables unprotected (issue 12, item 2).

A bad configuration loads the strictest rules and names the file and line; any other
failure while loading withholds every pandas table with the reason, and unloading
restores pandas exactly.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sdc_magic.config import STRICT
from sdc_magic.jupyter import extension, kernel

SMALL = "pd.DataFrame({'k': ['a'] * 7 + ['b'] * 40 + ['c'] * 50}).groupby('k').size()"


@pytest.fixture
def fresh(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A shell in an empty folder, with no session yet (so the configuration is read again)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    monkeypatch.setattr(kernel, "_session", None)
    shell.ns["pd"] = pd
    yield shell
    # unloaded here, while the session this test made is still the kernel's: the shell fixture's
    # unload runs after monkeypatch has put the previous session back, and left this one's
    # wrappers installed (a later test then found pandas still wrapped)
    if "sdc_magic" in shell.ip.extension_manager.loaded:
        shell.magic("unload_ext sdc_magic")


def _assert_withheld(ran: Any) -> None:
    data, meta = ran.tables[0]
    assert meta["sdc_magic"]["status"] == "blocked"
    assert "withheld" in data["text/plain"] and "withheld" in data["text/html"]
    assert "40" not in data["text/plain"] and "40" not in data["text/html"]


def test_toml_syntax_error_loads_strict_rules_and_names_file_and_line(fresh: Any, tmp_path: Path) -> None:
    (tmp_path / "sdc.toml").write_text('preset = "humanitarian"\nthreshold = = 5\n')
    out = fresh.magic("load_ext sdc_magic")
    assert "sdc.toml" in out.stderr and "line 2" in out.stderr and "STRICTEST" in out.stderr
    assert extension.session().rules == STRICT
    ran = fresh.run(SMALL)
    meta = ran.meta
    assert meta["rules"]["threshold"] == 10 and meta["hidden"] >= 1  # 7 < 10: hidden under STRICT
    assert " 7\n" not in ran.data["text/plain"] + "\n"


def test_missing_config_named_by_env_loads_strict(fresh: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDC_MAGIC_CONFIG", str(tmp_path / "team.toml"))
    out = fresh.magic("load_ext sdc_magic")
    assert "team.toml" in out.stderr
    assert extension.session().rules == STRICT
    assert fresh.run(SMALL).meta["hidden"] >= 1


def test_bad_pyproject_section_loads_strict(fresh: Any, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.sdc_magic]\nthreshold = nan\n")
    out = fresh.magic("load_ext sdc_magic")
    assert "pyproject.toml" in out.stderr and "threshold" in out.stderr
    assert extension.session().rules == STRICT


def test_failure_while_loading_withholds_every_table(fresh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.capture import Capture

    def broken(self: Any) -> None:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(Capture, "install", broken)
    out = fresh.magic("load_ext sdc_magic")  # must not raise
    assert "injected fault" in out.stderr
    ran = fresh.run(SMALL)
    _assert_withheld(ran)
    assert len(ran.outputs) == 1  # the placeholder only: no raw bundle beside it
    shown = fresh.run("[pd.DataFrame({'x': [123456]})]")  # inside a container too
    assert "123456" not in shown.everything
    fresh.magic("unload_ext sdc_magic")
    assert "40" in repr(fresh.run(SMALL).result)  # pandas restored


def test_ledger_that_cannot_be_opened_withholds(fresh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger_module = sys.modules["sdc_magic.records.ledger"]

    class Broken(ledger_module.Ledger):  # type: ignore[name-defined,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(ledger_module, "Ledger", Broken)
    fresh.magic("load_ext sdc_magic")
    _assert_withheld(fresh.run(SMALL))


def test_ledger_warnings_are_shown_at_load(fresh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger_module = sys.modules["sdc_magic.records.ledger"]
    original = ledger_module.Ledger

    class Warned(original):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.warnings = ["ledger.jsonl line 3 set aside in ledger.jsonl.corrupt"]

    monkeypatch.setattr(ledger_module, "Ledger", Warned)
    out = fresh.magic("load_ext sdc_magic")
    assert "line 3 set aside" in out.stderr
    ran = fresh.run(SMALL)
    assert ran.meta["status"] in ("pass", "suppressed")
    assert "line 3 set aside" not in ran.everything  # said once, at load


def test_import_failure_withholds(fresh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sdc_magic

    monkeypatch.setitem(sys.modules, "sdc_magic.jupyter.extension", None)  # `from .extension import load` fails
    sdc_magic.load_ipython_extension(fresh.ip)
    try:
        _assert_withheld(fresh.run(SMALL))
    finally:
        sdc_magic.unload_ipython_extension(fresh.ip)
    assert "40" in repr(fresh.run(SMALL).result)


def _run_in_fresh_kernel(blocked_module: str) -> str:
    """``%load_ext sdc_magic`` in a fresh interpreter where ``blocked_module`` cannot be imported,
    then a table with a cell of 2 is displayed; prints what a front-end would receive."""
    import subprocess
    import sys

    code = f"""
import sys, os
sys.modules[{blocked_module!r}] = None  # importing it raises ImportError
os.environ["SDC_MAGIC_CONFIG"] = ""
import pandas as pd
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
sent = []
shell.display_pub.publish = lambda data, metadata=None, **k: sent.append((data, metadata or {{}}))
shell.run_line_magic("load_ext", "sdc_magic")
table = pd.DataFrame({{"k": ["a"] * 2 + ["b"] * 40 + ["c"] * 50}}).groupby("k").size()
shell.display_formatter.format(table)
from IPython.display import display
display(table)
text = " ".join(str(d.get("text/plain", "")) + str(d.get("text/html", "")) for d, _ in sent)
print("RESULT", "RAW" if ("40" in text and "50" in text) else "NOT-RAW", repr(text[:300]))
"""
    import tempfile

    # A fresh folder: the kernel keeps its ledger and patterns in ``.sdc_magic/`` of its working
    # directory, and outputs that other tests left there would be linked with this table.
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              cwd=folder, env={"PATH": "/usr/bin:/bin", "SDC_MAGIC_CONFIG": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    return next(line for line in done.stdout.splitlines() if line.startswith("RESULT ")).removeprefix("RESULT ")


def test_a_kernel_without_jinja2_checks_tables() -> None:
    """Kernel-only environments may lack jinja2 (pandas' Styler needs it): tables are checked."""
    line = _run_in_fresh_kernel("jinja2")
    assert line.startswith("NOT-RAW") and "cleared, cells hidden" in line, line


def test_an_extension_that_cannot_import_withholds_every_table() -> None:
    line = _run_in_fresh_kernel("sdc_magic.jupyter.extension")
    assert line.startswith("NOT-RAW") and "withheld" in line, line
