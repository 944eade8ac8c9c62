"""What the export writes is what the screen shows (red team of this stop, four classes).

1. A microdata release wrote its hidden window column in full (✕ on screen, 3 in the CSV).
2. A table shown by a selection (``drop``, ``loc``, ``head``) kept the labels of the cells it
   left out in its certificate (ages 101 and 102, one person each).
3. ...and their values: A·M = 20 of an unstacked table shown by its F column, beside a later
   "M 21" of districts A and C, gave the hidden C·M = 1.
4. A rounded table's certificate gave its hidden cells the intervals of the exact margins
   ([0; 17] beside a total shown as 35 tells it is 37).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.records.verification import verify


def _export(sess: Session, tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    sess.export(str(folder))
    assert verify(folder) == []
    return folder


def test_a_microdata_release_leaves_hidden_cells_empty(sess: Session, p: Any, tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    sess.set_microdata(["sex"], k=3)
    out = sess.publish(p.select("district", "sex", pl.len().over("district").alias("n")))
    assert out.metadata["sdc_magic"]["status"] == "pass"
    csv = (_export(sess, tmp_path) / "out-1.csv").read_text().splitlines()
    assert all(line.endswith(",") for line in csv if line.startswith("C,"))


@pytest.mark.parametrize("select", [lambda t: t.drop([101, 102]), lambda t: t.loc[[30, 40]],
                                    lambda t: t.head(2), lambda t: t[t.index < 100]])
def test_labels_a_selection_left_out_stay_out(sess: Session, tmp_path: Path, select: Any) -> None:
    d = pd.DataFrame({"age": [30] * 35 + [40] * 36 + [101, 102]})
    out = sess.publish(select(d.groupby("age").size()))
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")
    folder = _export(sess, tmp_path)
    cert = json.loads((folder / "out-1.certificate.json").read_text())
    labels = [lab for table in cert["tables"] for cell in table["cells"] for lab in cell["labels"]]
    labels += [str(item.get("row")) for item in cert["published"] + cert["hidden"]]
    assert not {"101", "102", "101.0", "102.0"} & set(labels), labels
    assert "101" not in (folder / "out-1.csv").read_text()


def test_values_a_selection_left_out_stay_out(sess: Session, df: pd.DataFrame, tmp_path: Path) -> None:
    out = sess.publish(df.groupby(["district", "sex"]).size().unstack().loc[:, ["F"]])
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")
    cert = json.loads((_export(sess, tmp_path) / "out-1.certificate.json").read_text())
    for table in cert["tables"]:
        for cell in table["cells"]:
            if "M" in cell["labels"] or "Total" in cell["labels"]:
                assert "value" not in cell, cell


def test_a_rounded_table_states_no_exact_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  df: pd.DataFrame) -> None:
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path / "ledger"))
    sess = Session(rules=preset("opensafely"))
    sess.capture.install()
    try:
        out = sess.publish(pd.crosstab(df.district, df.sex, margins=True))
        assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")
        assert "between 0 and 17" not in json.dumps(out.data) + json.dumps(out.metadata, default=str)
        cert = json.loads((_export(sess, tmp_path) / "out-1.certificate.json").read_text())
        assert all("interval" not in item for item in cert["hidden"])
    finally:
        sess.capture.uninstall()
