"""After a kernel restart, rows are found again by their index labels (issue 23.13, a variant).

Within one kernel a filtered copy of a frame is placed among the earlier rows by its index
labels, whatever its columns. The linking memory saved for the next kernel used to keep the
rows' column hashes only, so after a restart a frame whose columns repeat (``sex`` and an age,
766 people in 2 × 90 combinations) could not be matched by content and two cleared tables
differed by one person (407 − 406 = 1). The labels' hashes are now saved with the rows.

Each "kernel" here is a fresh session on the folder's default ledger (as a headless run
without a notebook name), with the data made again from scratch (another object, the same
rows); the last test runs two real kernels through nbclient.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _nbutil import execute_notebook

MAKE_PEOPLE = """
import numpy as np, pandas as pd
rng = np.random.default_rng(0)
df = pd.DataFrame({"sex": rng.choice(["F", "M"], 766), "age": rng.integers(0, 90, 766)})
df.loc[0, "age"] = 101
"""


def people(index: str = "range") -> pd.DataFrame:
    """766 people whose columns repeat (2 sexes × 90 ages); person 0 is 101 years old."""
    ns: dict[str, Any] = {}
    exec(MAKE_PEOPLE, ns)
    df = ns["df"]
    if index == "case_id":
        df.index = pd.Index([f"case-{i:04d}" for i in range(len(df))], name="case_id")
    elif index == "multi":
        df.index = pd.MultiIndex.from_arrays([np.arange(len(df)) % 7, np.arange(len(df))], names=["office", "n"])
    return df


def kernel(folder: Path, table_of: Any, data: pd.DataFrame) -> dict[str, Any]:
    """One kernel: a fresh session on the folder's default ledger publishes one table."""
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session
    from sdc_magic.records.ledger import Ledger

    s = Session(rules=preset("humanitarian"))
    s.ledger = Ledger(folder=folder)
    s.capture.install()
    try:
        return s.publish(table_of(data)).metadata["sdc_magic"]
    finally:
        s.capture.uninstall()


def hidden_cells(meta: dict[str, Any]) -> dict[Any, list[str]]:
    return {rec["cell"][0]: [x["rule"] for x in rec["reasons"]] for rec in meta.get("reasons", [])}


@pytest.fixture(autouse=True)
def _no_notebook_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)


@pytest.mark.parametrize("index", ["range", "case_id", "multi"])
def test_a_filtered_copy_after_a_restart_is_linked_by_its_labels(tmp_path, index) -> None:
    first = kernel(tmp_path, lambda d: d.groupby("sex").size(), people(index))
    assert first["status"] == "pass"
    second = kernel(tmp_path, lambda d: d[d.age <= 100].groupby("sex").size(), people(index))
    assert second["status"] != "pass", second
    assert "differencing" in hidden_cells(second).get("M", []), second


def test_other_statistics_and_reshaped_copies_after_a_restart(tmp_path) -> None:
    """The same person left out through a boolean mask by label, a crosstab, and a query."""
    kernel(tmp_path, lambda d: d.groupby("sex").size(), people())
    by_label = kernel(tmp_path, lambda d: d.drop(index=0).groupby("sex").size(), people())
    assert "differencing" in hidden_cells(by_label).get("M", []), by_label
    crosstab = kernel(tmp_path, lambda d: pd.crosstab(d.query("age < 100").sex, "n"), people())
    assert crosstab["status"] != "pass", crosstab


def test_an_unrelated_frame_numbered_alike_is_not_linked_after_a_restart(tmp_path) -> None:
    """Labels alone prove nothing: 0, 1, 2, ... of another data set, whose columns disagree on
    the sampled rows, is not the earlier people (no differencing, no over-protection)."""
    kernel(tmp_path, lambda d: d.groupby("sex").size(), people())
    rng = np.random.default_rng(7)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 765), "age": rng.integers(0, 90, 765)})
    meta = kernel(tmp_path, lambda d: d.groupby("sex").size(), other)
    assert meta["status"] == "pass", meta


def test_the_saved_memory_holds_hashes_of_labels_never_the_labels(tmp_path) -> None:
    kernel(tmp_path, lambda d: d.groupby("sex").size(), people("case_id"))
    rows_files = list(tmp_path.glob("*.rows.npz"))
    assert rows_files
    for path in tmp_path.iterdir():
        assert b"case-0" not in path.read_bytes(), path
    with np.load(rows_files[0]) as saved:
        assert saved["labels"].dtype == np.uint64 and len(saved["labels"]) == 766


def test_a_memory_saved_without_labels_still_loads(tmp_path) -> None:
    """A file from an earlier version (no label hashes) is read; its rows are found by content, here
    as a sub-multiset of the saved rows (``Universe._by_multiset``)."""
    kernel(tmp_path, lambda d: d.groupby("sex").size(), people())
    for path in tmp_path.glob("*.rows.npz"):
        with np.load(path) as saved:
            kept = {k: saved[k] for k in saved.files if k != "labels"}
        np.savez(path, **kept)
    meta = kernel(tmp_path, lambda d: d[d.age <= 100].groupby("sex").size(), people())
    assert meta["status"] != "pass", meta


def test_two_headless_kernels_in_one_folder(tmp_path) -> None:
    """Two notebooks run one after the other by nbclient in one folder, no notebook name: the
    second kernel's table is compared with the first kernel's."""
    setup = "%load_ext sdc_magic\n" + MAKE_PEOPLE
    _, first = execute_notebook([setup, "df.groupby('sex').size()"], tmp_path, name="a.ipynb")
    _, second = execute_notebook([setup, "df[df.age <= 100].groupby('sex').size()"], tmp_path, name="b.ipynb")
    meta_a = first["cells"][1]["outputs"][0]["metadata"]["sdc_magic"]
    meta_b = second["cells"][1]["outputs"][0]["metadata"]["sdc_magic"]
    assert meta_a["status"] == "pass"
    assert meta_b["status"] in {"blocked", "suppressed", "review"}, meta_b
    shown = "".join(second["cells"][1]["outputs"][0]["data"]["text/plain"])
    assert "406" not in shown and "407" not in shown, shown
