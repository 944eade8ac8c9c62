"""Ledger, exception requests, export for output checkers, and verification without the data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.records.export import ExportError
from sdc_magic.records.ledger import Ledger
from sdc_magic.records.verification import results_schema, verify


def _publish_mix(session: Session, referrals: pd.DataFrame) -> None:
    # each table on its own: what the export does with each status is tested here, not linking
    session.linking = False
    session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())  # pass
    session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())  # suppressed
    session.publish(referrals.head())  # row-level: blocked
    session.publish(referrals.groupby(["admin2", "age_band"])["days_to_first_service"].median())  # primary only


def test_export_writes_only_cleared_outputs_and_verifies(session, referrals, tmp_path: Path) -> None:
    _publish_mix(session, referrals)
    statuses = [r.status for r in session.outputs]
    assert statuses == ["pass", "suppressed", "blocked", "suppressed"]
    written = session.export(tmp_path / "out")
    assert [r.id for r in written] == ["out-1", "out-2", "out-4"]
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [".sdc_export_manifest.json", "checksums", "config.json", "out-1.certificate.json", "out-1.csv", "out-2.certificate.json",
                     "out-2.csv", "out-4.certificate.json", "out-4.csv", "results.json", "summary.html"]
    assert verify(tmp_path / "out") == []
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    import jsonschema

    jsonschema.validate(results, results_schema())
    assert results["results"]["out-1"]["status"] == "pass"
    assert results["results"]["out-2"]["status"] == "review"  # mitigated: the checker has the last word
    assert results["results"]["out-2"]["properties"]["mitigation"] == "suppress"
    # the CSV of the suppressed table has empty hidden cells and flags them for SACRO-Viewer
    csv_text = (tmp_path / "out" / "out-2.csv").read_text()
    cells = results["results"]["out-2"]["files"][0]["sdc"]["cells"]
    flagged = [tuple(p) for ps in cells.values() for p in ps]
    body = [line.split(",")[1:] for line in csv_text.splitlines()[1:]]
    assert flagged and all(body[i][j] == "" for i, j in flagged)
    # checksums are lowercase hex without newline, as SACRO-Viewer compares them
    digest = (tmp_path / "out" / "checksums" / "out-2.csv.txt").read_text()
    assert len(digest) == 64 and digest == digest.strip().lower()


def test_export_refuses_a_non_empty_folder(session, referrals, tmp_path: Path) -> None:
    session.publish(referrals.groupby("sex").size())
    (tmp_path / "keep.txt").write_text("analyst notes")
    with pytest.raises(ExportError, match="not empty"):
        session.export(tmp_path)
    # --force replaces only what an earlier export wrote: the analyst's file stops it
    with pytest.raises(ExportError, match=r"keep\.txt"):
        session.export(tmp_path, force=True)
    assert (tmp_path / "keep.txt").read_text() == "analyst notes"
    (tmp_path / "keep.txt").unlink()
    session.export(tmp_path)
    session.export(tmp_path, force=True)  # an earlier export is replaced
    assert verify(tmp_path) == []


def test_tampering_is_detected(session, referrals, tmp_path: Path) -> None:
    _publish_mix(session, referrals)
    session.export(tmp_path)
    csv_path = tmp_path / "out-1.csv"
    original = csv_path.read_text()
    csv_path.write_text(original.replace(",1", ",2", 1))
    problems = verify(tmp_path)
    assert any(p.startswith("out-1.csv: checksum") for p in problems)
    assert any("out-1.csv: cell" in p for p in problems)
    csv_path.write_text(original)
    assert verify(tmp_path) == []
    # an interval changed in a certificate, even with its checksum recomputed, fails the re-audit
    cert_path = tmp_path / "out-2.certificate.json"
    cert = json.loads(cert_path.read_text())
    hidden = next(c for t in cert["tables"] for c in t["cells"] if c["status"] == "primary")
    hidden["lower"] = hidden["lower"] + 50  # (its upper may be unbounded: the total is not published)
    cert_path.write_text(json.dumps(cert))
    from sdc_magic.records.export import sha256

    (tmp_path / "checksums" / "out-2.certificate.json.txt").write_text(sha256(cert_path))
    problems = verify(tmp_path)
    manifest = [p for p in problems if p.startswith(".sdc_export_manifest.json")]  # not resealed: said too
    assert manifest and problems[len(manifest):] and all(
        p.startswith("out-2.certificate.json") for p in problems if p not in manifest)


def test_exception_requests_are_exported_for_the_checker(session, referrals, tmp_path: Path) -> None:
    _publish_mix(session, referrals)
    session.request_exception("out-2", "needed for district planning")
    session.ledger.comment("out-1", "bulletin table")
    session.ledger.drop("out-4")
    written = [r.id for r in session.export(tmp_path)]
    assert written == ["out-1", "out-2"]
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert results["out-2"]["status"] == "review" and results["out-2"]["exception"] == "needed for district planning"
    assert results["out-1"]["comments"] == ["bulletin table"]
    assert "needed for district planning" in (tmp_path / "summary.html").read_text()
    with pytest.raises(KeyError, match="out-99"):
        session.request_exception("out-99", "nope")


def test_ledger_persists_across_restarts(tmp_path: Path, referrals) -> None:
    first = Session()
    first.ledger = Ledger(tmp_path, persist=True)
    first.capture.install()
    try:
        first.publish(referrals.groupby("sex").size())
        first.publish(referrals.groupby(["sex", "age_band"]).size())
    finally:
        first.capture.uninstall()
    first.ledger.comment("out-1", "kept")
    again = Ledger(tmp_path, persist=True)
    assert [r.id for r in again.records] == ["out-1", "out-2"]
    assert again.get("out-1").comments == ["kept"]
    assert again.new_id() == "out-3"
    assert any(e["event"] == "restart" for e in again.events)
    text = (tmp_path / "ledger.jsonl").read_text()
    assert '"event": "restart"' in text
    frame = again.frame()
    assert list(frame["id"]) == ["out-1", "out-2"] and frame["exportable"].all()
