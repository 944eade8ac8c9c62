"""Engines are wrapped when the user imports them (issue 24.9): ``%load_ext`` imports no engine
and no solver,
an engine imported later is captured before its first object exists, a probe of the engine
(``importlib.util.find_spec``) does not use the hook up, and unloading leaves the import
system as it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("polars")
pytest.importorskip("duckdb")

SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "sdc_magic")
    loaded = {m: m in sys.modules for m in ("polars", "duckdb", "pyspark")}
    solvers = {m: m in sys.modules for m in ("highspy", "pulp", "scipy")}
    probe = importlib.util.find_spec("polars") is not None  # a probe: the hook must survive it
    import polars as pl
    from sdc_magic.jupyter.kernel import session
    shell.user_ns["pl"] = pl
    shell.run_cell('pl.DataFrame({"a": ["x"] * 12 + ["y"] * 9 + ["z"] * 2}).group_by("a").len()')
    record = session().ledger.records[-1]
    import duckdb
    engines = sorted(session().capture.engines)
    shell.run_line_magic("unload_ext", "sdc_magic")
    print("RESULT " + json.dumps({"loaded": loaded, "solvers": solvers, "probe": probe, "status": record.status,
                                  "hidden": record.hidden, "engines": engines,
                                  "after_unload": sorted(session().capture.engines),
                                  "meta_path_restored": not any(type(f).__name__ == "AfterImport"
                                                                for f in sys.meta_path)}))
""")


def test_engines_are_wrapped_on_import_and_the_hook_goes_away() -> None:
    import json

    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["loaded"] == {"polars": False, "duckdb": False, "pyspark": False}
    # the protection's solvers load with the first table that hides a cell, not at %load_ext
    assert result["solvers"] == {"highspy": False, "pulp": False, "scipy": False}
    assert result["probe"] is True
    # the polars table was captured (its group of 2 hidden), not shown as an unverified frame
    assert result["status"] == "suppressed" and result["hidden"] >= 1, result
    assert result["engines"] == ["duckdb", "polars"]
    assert result["after_unload"] == [] and result["meta_path_restored"] is True


def test_an_engine_imported_before_loading_is_wrapped_at_once(sdc) -> None:
    import polars  # noqa: F401  (already imported in this test process)

    from sdc_magic.jupyter.kernel import session

    assert "polars" in session().capture.engines


def test_the_protect_packages_public_names_survive_lazy_loading() -> None:
    """``from sdc_magic.protect import audit`` is the function whatever was imported first (the
    submodule of the same name, through the display path, set the package attribute)."""
    code = ("import sdc_magic.checking.check, sdc_magic.protect.api\n"
            "from sdc_magic.protect import audit, protect, Protection, protection_levels\n"
            "print('RESULT', callable(audit) and audit.__module__, protect.__module__, protection_levels.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RESULT sdc_magic.protect.api sdc_magic.protect.api sdc_magic.protect.levels" in done.stdout, done.stdout
