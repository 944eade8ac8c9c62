"""Tables of two notebooks of one folder are compared, each kernel reading the other's memory.

Red team 53b (11): A.ipynb and B.ipynb in one folder, each named by the server (``JPY_SESSION_NAME``,
as JupyterLab runs them), kept separate ledgers and separate linking memories: A showed the counts
by sex (37/36), B the same people outside district C (35/35), both ``pass``, both exported and
verified — together C's 2 women and 1 man. Each kernel now reads the folder's other memories
(:mod:`sdc_magic.linking.siblings`) before each table and never writes them into its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_engines_redteam import PEOPLE

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.linking import persistence
from sdc_magic.records.ledger import Ledger


class Kernel:
    """One notebook's kernel: a session on the folder's ledger under the notebook's name."""

    def __init__(self, folder: Path, notebook: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.notebook, self.monkeypatch = folder, notebook, monkeypatch
        monkeypatch.setenv("JPY_SESSION_NAME", notebook)
        self.session = Session(rules=preset("humanitarian"))
        self.session.ledger = Ledger(folder=folder)

    def show(self, table_of: Any) -> Any:
        self.monkeypatch.setenv("JPY_SESSION_NAME", self.notebook)
        self.session.capture.install()
        try:
            return self.session.publish(table_of(PEOPLE.copy()))
        finally:
            self.session.capture.uninstall()


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _cells(out: Any) -> list[str]:
    body = out.data["text/plain"].split("\nsdc_magic:")[0]
    return [line.split()[-1] for line in body.splitlines()[1:] if len(line.split()) == 2]


EVERYONE = staticmethod(lambda d: d.groupby("sex").size())
OUTSIDE_C = staticmethod(lambda d: d[d.district != "C"].groupby("sex").size())


@pytest.mark.parametrize("order", ["A first", "B first"])
def test_two_notebooks_never_show_both_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    a, b = Kernel(tmp_path, "A.ipynb", monkeypatch), Kernel(tmp_path, "B.ipynb", monkeypatch)
    first, second = (a.show(EVERYONE), b.show(OUTSIDE_C)) if order == "A first" else \
        (b.show(OUTSIDE_C), a.show(EVERYONE))
    assert _status(first) == "pass"
    assert _status(second) == "blocked" or "✕" in _cells(second), second.data["text/plain"]
    assert any("A: out-1" in n or "B: out-1" in n for n in second.metadata["sdc_magic"].get("notes", [])) \
        or any("A: out-1" in x["message"] or "B: out-1" in x["message"]
               for r in second.metadata["sdc_magic"].get("reasons", []) for x in r["reasons"])


def test_a_running_kernel_reads_what_the_other_notebook_showed_since(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = Kernel(tmp_path, "A.ipynb", monkeypatch), Kernel(tmp_path, "B.ipynb", monkeypatch)
    assert _status(a.show(lambda d: d[d.district == "A"].groupby("sex").size())) == "pass"
    assert _status(b.show(lambda d: d.groupby("flag").size())) == "pass"  # 42 / 31
    later = a.show(lambda d: d[d.district != "C"].groupby("flag").size())  # 42 + 31 − 73 + 70: C's 3
    shown = [int(c) for c in _cells(later) if c.isdigit()]
    assert _status(later) == "blocked" or sum(shown) != 70, later.data["text/plain"]


def test_a_memory_holds_its_own_notebooks_outputs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = Kernel(tmp_path, "A.ipynb", monkeypatch), Kernel(tmp_path, "B.ipynb", monkeypatch)
    a.show(lambda d: d.groupby("district").size())
    b.show(lambda d: d.groupby(["district", "sex"]).size())
    for notebook, other in (("A", "B"), ("B", "A")):
        ids = [p.out_id for u in persistence.load(tmp_path / f"{notebook}.jsonl.linking.npz") for p in u.populations]
        assert ids and not any(":" in i or other in i for i in ids), ids


def test_an_unreadable_memory_of_another_notebook_is_said_not_fatal(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Z.jsonl.linking.npz").write_bytes(b"not an npz")
    out = Kernel(tmp_path, "A.ipynb", monkeypatch).show(EVERYONE)
    assert _status(out) in ("pass", "review")
    assert any("'Z'" in n for n in out.metadata["sdc_magic"].get("notes", [])), out.metadata["sdc_magic"]


def test_one_notebook_alone_is_checked_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = Kernel(tmp_path, "A.ipynb", monkeypatch).show(lambda d: d.groupby(["district", "sex"]).size())
    assert _status(out) == "suppressed" and out.data["text/plain"].split("\nsdc_magic:")[0].count("✕") == 4
