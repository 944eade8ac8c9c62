"""``verify`` applies the rules again and accepts no key the tool does not write (issue 23.7).

Each forgery below rebuilds everything a careful tamperer would (the CSV, the certificate,
``results.json``, ``summary.html``, the checksums and the manifest), so that only the new
checks of ``sdc_magic/records/strict.py`` can catch it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.records.layout import MANIFEST, sha256, summary_html
from sdc_magic.records.verification import verify


def _export(tables: list[Any], folder: Path, rules: Any = None) -> Path:
    """Export the tables (each built by a function, once the capture is installed)."""
    session = Session(rules=rules) if rules is not None else Session()
    session.capture.install()
    try:
        for table in tables:
            session.publish(table())
    finally:
        session.capture.uninstall()
    session.export(folder)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, referrals: Any) -> Path:
    folder = _export([lambda: referrals.groupby(["admin2", "case_category"]).size().unstack(),  # out-1 pass
                      lambda: referrals.groupby(["admin2", "sex", "age_band"]).size().unstack()],  # suppressed
                     tmp_path_factory.mktemp("strict") / "out")
    assert sorted(p.name for p in folder.glob("*.csv")) == ["out-1.csv", "out-2.csv"]
    assert verify(folder) == []
    return folder


@pytest.fixture
def folder(exported: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    return copy


def reseal(folder: Path) -> None:
    """Everything a tamperer recomputes: summary page, checksums, manifest."""
    results = json.loads((folder / "results.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    (folder / "summary.html").write_text(summary_html(results, config["rules"]), encoding="utf-8")
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST)
    for name in files:
        (folder / "checksums" / f"{name}.txt").write_text(sha256(folder / name))
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"] = {p.relative_to(folder).as_posix(): sha256(p)
                         for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))


def edit(folder: Path, name: str, change: Any) -> None:
    data = json.loads((folder / name).read_text())
    change(data)
    (folder / name).write_text(json.dumps(data, indent=1))


def test_resealing_an_untouched_export_still_verifies(folder: Path) -> None:
    reseal(folder)
    assert verify(folder) == []  # the forgeries below fail for what they change, not for the resealing


def test_a_count_of_two_published_as_pass_fails(folder: Path) -> None:
    cert = json.loads((folder / "out-1.certificate.json").read_text())
    first = cert["published"][0]
    old = first["value"]
    first["value"] = 2
    (folder / "out-1.certificate.json").write_text(json.dumps(cert, indent=1))
    lines = (folder / "out-1.csv").read_text().splitlines()
    cells = lines[1].split(",")
    assert cells[1] == str(old)
    cells[1] = "2"
    lines[1] = ",".join(cells)
    (folder / "out-1.csv").write_text("\n".join(lines) + "\n")
    reseal(folder)
    problems = verify(folder)
    assert any("below the threshold 5 of its own rules" in p for p in problems), problems


def test_a_protection_table_publishing_a_small_count_fails(folder: Path) -> None:
    def change(cert: dict) -> None:
        cell = next(c for c in cert["tables"][0]["cells"] if c["status"] == "safe")
        cell["value"] = 3

    edit(folder, "out-2.certificate.json", change)
    reseal(folder)
    assert any("below the threshold" in p for p in verify(folder))


def test_a_hidden_cell_stating_its_value_fails(folder: Path) -> None:
    edit(folder, "out-2.certificate.json", lambda c: c["hidden"][0].update(value=3))
    reseal(folder)
    assert any("states its value" in p for p in verify(folder))


def test_a_protection_table_stating_a_hidden_value_fails(folder: Path) -> None:
    def change(cert: dict) -> None:
        next(c for c in cert["tables"][0]["cells"] if c["status"] != "safe")["value"] = 3

    edit(folder, "out-2.certificate.json", change)
    reseal(folder)
    assert any("states its value" in p for p in verify(folder))


@pytest.mark.parametrize("where", ["certificate", "published cell", "table", "rules", "config", "config rules",
                                   "manifest"])
def test_raw_rows_under_an_extra_key_fail(folder: Path, where: str) -> None:
    rows = [{"case_id": "C-0001", "age": 101, "admin2": "Leogane"}]
    if where == "certificate":
        edit(folder, "out-1.certificate.json", lambda c: c.update(rows=rows))
    elif where == "published cell":
        edit(folder, "out-1.certificate.json", lambda c: c["published"][0].update(rows=rows))
    elif where == "table":
        edit(folder, "out-2.certificate.json", lambda c: c["tables"][0].update(rows=rows))
    elif where == "rules":
        edit(folder, "out-1.certificate.json", lambda c: c["rules"].update(rows=rows))
    elif where == "config":
        edit(folder, "config.json", lambda c: c.update(rows=rows))
    elif where == "config rules":
        edit(folder, "config.json", lambda c: c["rules_by_output"]["out-1"].update(rows=rows))
    reseal(folder)
    if where == "manifest":
        edit(folder, MANIFEST, lambda m: m.update(rows=rows))
    problems = verify(folder)
    assert any("unknown key(s) rows" in p for p in problems), problems


def test_a_manifest_with_a_wrong_checksum_fails(folder: Path) -> None:
    edit(folder, MANIFEST, lambda m: m["files"].update({"out-1.csv": "0" * 64}))
    assert any(f"{MANIFEST}: checksum of out-1.csv" in p for p in verify(folder))


def test_a_manifest_listing_a_file_that_is_not_there_fails(folder: Path) -> None:
    edit(folder, MANIFEST, lambda m: m["files"].update({"Leogane-F-3.csv": "0" * 64}))
    assert any("lists other files" in p for p in verify(folder))


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({"district": np.repeat(["A", "B", "C"], [40, 30, 12]),
                         "sex": rng.choice(["F", "M"], 82), "resolved": rng.random(82) < 0.5})


def test_honest_shares_and_rounded_counts_verify(tmp_path: Path) -> None:
    df = _people()
    shares = _export([lambda: df.district.value_counts(normalize=True)], tmp_path / "shares")
    rounded = _export([lambda: df.groupby(["district", "sex"]).size()], tmp_path / "rounded",
                      rules=preset("opensafely"))
    for folder in (shares, rounded):
        assert (folder / "out-1.csv").is_file()
        assert verify(folder) == []


def test_a_zero_published_under_zeros_hidden_fails(tmp_path: Path) -> None:
    df = _people()
    folder = _export([lambda: df.groupby("district").size()], tmp_path / "zeros", rules=preset("sacro"))
    assert (folder / "out-1.csv").is_file() and verify(folder) == []

    def change(cert: dict) -> None:
        assert cert["rules"]["zeros"] == "suppress"
        cert["published"][0]["value"] = 0

    edit(folder, "out-1.certificate.json", change)
    lines = (folder / "out-1.csv").read_text().splitlines()
    label, _ = lines[1].rsplit(",", 1)
    lines[1] = f"{label},0"
    (folder / "out-1.csv").write_text("\n".join(lines) + "\n")
    reseal(folder)
    assert any("zeros hidden" in p for p in verify(folder))
