"""Shared fixtures: an in-process IPython shell with sdc_magic loaded, and output capture.

The shell is IPython's global test shell (``IPython.testing.globalipapp``): one per
pytest process. ``sdc`` loads the extension for one test and always unloads it, and
resets the rules to the default preset, so tests do not leak state into each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

# Rules must not come from a sdc.toml / pyproject.toml found above the working directory.
os.environ["SDC_MAGIC_CONFIG"] = ""


@dataclass
class Ran:
    """What one executed cell produced."""

    outputs: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (data, metadata)
    stdout: str = ""
    stderr: str = ""
    result: Any = None
    error: BaseException | None = None

    @property
    def tables(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Rich outputs published by sdc_magic (they carry metadata.sdc_magic; working notes,
        Python values that are not tables, are not among them)."""
        return [(d, m) for d, m in self.outputs
                if "sdc_magic" in (m or {}) and (m["sdc_magic"] or {}).get("kind") != "note"]

    @property
    def meta(self) -> dict[str, Any]:
        tables = self.tables
        assert len(tables) == 1, f"expected one checked output, got {len(tables)}: {self.stdout[:500]}"
        return tables[0][1]["sdc_magic"]

    @property
    def data(self) -> dict[str, Any]:
        tables = self.tables
        assert len(tables) == 1, f"expected one checked output, got {len(tables)}"
        return tables[0][0]

    @property
    def everything(self) -> str:
        """All text published by the cell, every mime type (for leak checks)."""
        parts = [self.stdout, self.stderr]
        for data, _ in self.outputs:
            parts += [v if isinstance(v, str) else repr(v) for v in data.values()]
        return "\n".join(parts)


class Shell:
    """Thin wrapper running cells in the global test shell and capturing what they publish."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip

    @property
    def ns(self) -> dict[str, Any]:
        return self.ip.user_ns

    def run(self, code: str, raise_error: bool = True) -> Ran:
        from IPython.utils.capture import capture_output

        with capture_output(display=True) as cap:
            result = self.ip.run_cell(code, store_history=True)
        ran = Ran(outputs=[(o.data, o.metadata) for o in cap.outputs], stdout=cap.stdout, stderr=cap.stderr,
                  result=result.result, error=result.error_in_exec or result.error_before_exec)
        if raise_error and ran.error is not None:
            raise ran.error
        return ran

    def magic(self, line: str) -> Ran:
        """Run a line magic (``"sdc rules threshold=3"``); errors propagate."""
        from IPython.utils.capture import capture_output

        name, _, rest = line.partition(" ")
        with capture_output(display=True) as cap:
            self.ip.run_line_magic(name, rest)
        return Ran(outputs=[(o.data, o.metadata) for o in cap.outputs], stdout=cap.stdout, stderr=cap.stderr)


@pytest.fixture(scope="session")
def ipython() -> Any:
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    assert ip is not None
    return ip


@pytest.fixture
def shell(ipython: Any) -> Iterator[Shell]:
    """The test shell *without* sdc_magic (unloaded afterwards if a test loaded it)."""
    sh = Shell(ipython)
    yield sh
    _unload(ipython)


@pytest.fixture
def sdc(ipython: Any) -> Iterator[Shell]:
    """The test shell with ``%load_ext sdc_magic`` done; unloaded and rules reset afterwards."""
    sh = Shell(ipython)
    _unload(ipython)
    sh.magic("load_ext sdc_magic")
    try:
        yield sh
    finally:
        _unload(ipython)


def _unload(ip: Any) -> None:
    from IPython.utils.capture import capture_output

    with capture_output():
        if "sdc_magic" in ip.extension_manager.loaded:
            ip.run_line_magic("unload_ext", "sdc_magic")
    try:
        from sdc_magic.jupyter import kernel

        current = kernel.current()
        if current is not None:
            current.use_preset("humanitarian")
            current.registry.clear()
            current.last_error = None
    except ImportError:  # pragma: no cover
        pass


@pytest.fixture
def session() -> Iterator[Any]:
    """A fresh checking session with evidence capture on (no IPython needed)."""
    from sdc_magic.jupyter.session import Session

    s = Session()
    s.capture.install()
    yield s
    s.capture.uninstall()


@pytest.fixture
def humanitarian_session() -> Iterator[Any]:
    """A fresh session under the humanitarian preset (threshold 5), capture on."""
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


@pytest.fixture(scope="module")
def referrals() -> Any:
    """The synthetic referrals data of the seed lesson (1,850 cases)."""
    from sdc_magic.datasets import make_referrals

    return make_referrals()


# ---- the red-team files (test_engines_redteam, test_redteam_*): 73 people, humanitarian rules
@pytest.fixture
def sess(humanitarian_session: Any) -> Any:
    """A humanitarian-preset session with capture installed (files may define their own)."""
    return humanitarian_session


@pytest.fixture
def df() -> Any:
    """A copy of the red team's 73 people (``test_engines_redteam.PEOPLE``)."""
    from test_engines_redteam import PEOPLE

    return PEOPLE.copy()


@pytest.fixture
def p() -> Any:
    """The red team's 73 people as a polars frame."""
    pl = pytest.importorskip("polars")
    from test_engines_redteam import PEOPLE

    return pl.from_pandas(PEOPLE)


@pytest.fixture(autouse=True)
def _ledger_folder_of_the_test(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger made during a test (and the linking memory and patterns kept beside it) goes to
    ``.sdc_magic/`` in the test's own folder, as if the kernel ran there: never to the repository,
    where the next run (or a fresh kernel started in the repository) would inherit it. A test
    that changes into its ``tmp_path`` finds it where a kernel would put it."""
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path / ".sdc_magic"))


@pytest.fixture(autouse=True)
def _fresh_protection_cache() -> Iterator[None]:
    """Each test starts with no cached protection: tests stay independent of their order, and a
    test that runs the search twice (determinism) really runs it twice."""
    from sdc_magic.protect import patterns
    from sdc_magic.protect.api import clear_cache

    clear_cache()
    patterns.use_store(None)  # a session with a persisted ledger sets one: never across tests
    yield
    patterns.use_store(None)


@pytest.fixture
def humanitarian_sessions() -> Any:
    """Make fresh sessions (preset humanitarian, capture installed; ``folder``: a persisted ledger
    there, as a restarted kernel of the same notebook); uninstalled last-first afterwards."""
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session
    from sdc_magic.records.ledger import Ledger

    made: list[Any] = []

    def make(folder: Any = None) -> Any:
        s = Session(rules=preset("humanitarian"))
        if folder is not None:
            s.ledger = Ledger(folder, persist=True)
        s.capture.install()
        made.append(s)
        return s

    yield make
    for s in reversed(made):  # (the last installed wraps the others: removed first)
        s.capture.uninstall()


@pytest.fixture(params=["by rows", "in the engine"])
def linked(request: Any, monkeypatch: Any) -> str:
    """Run a test twice: linking by rows (every table under ``IN_ENGINE_ROWS``), then inside the
    engine (DuckDB, polars: above it). A module may define its own."""
    from sdc_magic.evidence import rows as row_limits

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10_000_000 if request.param == "by rows" else 10)
    return request.param
