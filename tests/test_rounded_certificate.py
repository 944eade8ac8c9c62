"""A rounded table (OpenSAFELY's round to 5) never publishes an unrounded count.

The display and the CSV show rounded counts; the certificate must too — in its list of
displayed cells and in its protection tables — and its intervals are those the rounded
figures allow (each known within ± half the base), so ``verify`` accepts the folder.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sdc_magic.jupyter.session import Session
from sdc_magic.protect import certificate
from sdc_magic.records.verification import verify as verify_folder


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"g": rng.choice(list("ABCD"), 433), "h": rng.choice(list("xyz"), 433)})
    df.loc[:2, "h"] = "w"  # a small cell
    return df


def test_rounded_certificate_publishes_rounded_values_only(tmp_path) -> None:
    sess = Session()
    sess.use_preset("opensafely")
    df = _frame()
    with sess.capturing():
        table = pd.crosstab(df.g, df.h, margins=True)
    checked = sess.check(table)
    cert = certificate.build("out-1", checked, "out-1.csv", "0" * 64)
    assert all(v["value"] % 5 == 0 for v in cert["published"] if isinstance(v["value"], int))
    raw = {int(v) for v in table.to_numpy().ravel() if v % 5}
    assert raw, "the test needs counts that rounding changes"
    for t in cert["tables"]:
        assert t["rounding"] == 5
        for cell in t["cells"]:
            if cell["status"] == "safe":
                assert cell["value"] % 5 == 0, cell
    assert certificate.verify_certificate(cert) == []
    # hidden primary cells keep intervals at least as wide as the exact ones
    for t in cert["tables"]:
        for cell in t["cells"]:
            if cell["status"] == "primary":
                assert cell["upper"] - cell["lower"] >= 1


def test_rounded_export_verifies(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sess = Session()
    sess.use_preset("opensafely")
    df = _frame()
    with sess.capturing():
        table = pd.crosstab(df.g, df.h, margins=True)
    sess.publish(table)
    written = sess.export(tmp_path / "exp")
    assert written
    text = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "exp").glob("*.certificate.json"))
    cert = json.loads(text)
    assert all(v["value"] % 5 == 0 for v in cert["published"])
    assert verify_folder(tmp_path / "exp") == [], "verify must accept a rounded export"
