"""Notebooks whose names differ get different files (issue 23.10).

``my analysis.ipynb`` and ``my_analysis.ipynb`` both became ``my_analysis``: one ledger, one
linking memory and one export folder (B's export held A's table).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session, carry_linking_memory_over
from sdc_magic.records.export import default_export_folder
from sdc_magic.records.ledger import Ledger, ledger_file_name, safe_stem
from sdc_magic.records.redact import notebook_ledger


def test_names_that_used_to_collide_do_not() -> None:
    stems = ["my analysis", "my_analysis", "my-analysis", "my:analysis", "my analysis ", "mÿ analysis", "我的分析"]
    assert len({safe_stem(s) for s in stems}) == len(stems)
    assert safe_stem("my_analysis") == "my_analysis"  # a safe name keeps its files
    assert (safe_stem("my analysis") or "").startswith("my_analysis-")
    assert all(ch.isalnum() or ch in "-_." for s in stems for ch in safe_stem(s) or "")


def test_ledger_export_folder_and_redaction_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".sdc_magic").mkdir()
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "my analysis.ipynb"))
    a = (ledger_file_name(), default_export_folder())
    (tmp_path / ".sdc_magic" / a[0]).write_text("")
    assert notebook_ledger(tmp_path / "my analysis.ipynb").name == a[0]
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "my_analysis.ipynb"))
    b = (ledger_file_name(), default_export_folder())
    assert a[0] != b[0] and a[1] != b[1]
    assert b == ("my_analysis.jsonl", tmp_path / "build" / "export" / "my_analysis")


def test_two_notebooks_export_only_their_own_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    df = pd.DataFrame({"d": np.repeat(list("ABC"), [40, 30, 20]), "x": np.repeat([1, 2], [45, 45])})
    written = {}
    for name, key in (("my analysis.ipynb", "d"), ("my_analysis.ipynb", "x")):
        monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / name))
        session = Session()
        session.ledger = Ledger(tmp_path / ".sdc_magic")  # persisted, as a kernel's
        session.capture.install()
        try:
            session.publish(df.groupby(key).size())
        finally:
            session.capture.uninstall()
        written[name] = [r.csv.splitlines()[0] for r in session.export(None)]
    assert written == {"my analysis.ipynb": ["d,0"], "my_analysis.ipynb": ["x,0"]}
    assert len(list((tmp_path / "build" / "export").iterdir())) == 2


def test_the_linking_memory_of_a_renamed_notebook_is_copied_not_moved(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "my analysis.ipynb"))
    folder = tmp_path / ".sdc_magic"
    folder.mkdir()
    old = folder / "my_analysis.jsonl.linking.npz"
    old.write_bytes(b"memory")
    (folder / "my_analysis.jsonl.linking.npz.u1.rows.npz").write_bytes(b"rows")
    new = folder / f"{ledger_file_name()}.linking.npz"
    carry_linking_memory_over(new)
    assert new.read_bytes() == b"memory" and old.read_bytes() == b"memory"  # the old files stay
    assert (folder / f"{new.name}.u1.rows.npz").read_bytes() == b"rows"
