"""``verify`` catches tampering even when the checksums are recomputed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sdc_magic.records.export import MANIFEST, sha256
from sdc_magic.records.verification import verify


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, referrals: Any) -> Path:
    from sdc_magic.jupyter.session import Session

    session = Session()
    session.capture.install()
    try:
        session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())  # out-1 pass
        session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())  # out-2 suppressed
    finally:
        session.capture.uninstall()
    assert [r.status for r in session.outputs] == ["pass", "suppressed"]
    folder = tmp_path_factory.mktemp("export") / "out"
    session.export(folder)
    assert verify(folder) == []
    return folder


@pytest.fixture
def folder(exported: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    return copy


def rehash(folder: Path, *names: str) -> None:
    """What a tamperer does after an edit: recompute the checksums SACRO-Viewer compares, and the
    export manifest's (so that what each test changes is what fails)."""
    for name in names:
        (folder / "checksums" / f"{name}.txt").write_text(sha256(folder / name))
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        manifest["files"] = {p.relative_to(folder).as_posix(): sha256(p)
                             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
        manifest_path.write_text(json.dumps(manifest, indent=1))


def edit_json(folder: Path, name: str, change: Any) -> None:
    data = json.loads((folder / name).read_text())
    change(data)
    (folder / name).write_text(json.dumps(data, indent=1))
    rehash(folder, name)


def test_a_file_added_in_a_subfolder_fails(folder: Path) -> None:
    (folder / "extra").mkdir()
    (folder / "extra" / "microdata.csv").write_text("id,age\n1,101\n")
    problems = verify(folder)
    assert any("extra/microdata.csv" in p for p in problems)


def test_a_non_checksum_file_in_checksums_fails(folder: Path) -> None:
    (folder / "checksums" / "hidden_values.csv").write_text("Leogane,F,3\n")
    assert any("checksums/hidden_values.csv" in p for p in verify(folder))


def test_an_added_top_level_file_with_its_checksum_fails(folder: Path) -> None:
    (folder / "notes.txt").write_text("cell Leogane/F is 3")
    rehash(folder, "notes.txt")
    assert any(p.startswith("notes.txt: not part of the export") for p in verify(folder))


def test_results_status_review_to_pass_fails(folder: Path) -> None:
    def to_pass(data: dict) -> None:
        data["results"]["out-2"]["status"] = "pass"

    edit_json(folder, "results.json", to_pass)
    assert any("out-2" in p and "status" in p for p in verify(folder))

    def both(data: dict) -> None:  # and the sdc_magic status with it
        data["results"]["out-2"]["properties"]["sdc_magic_status"] = "pass"

    edit_json(folder, "results.json", both)
    assert any("its certificate says 'suppressed'" in p for p in verify(folder))


def test_results_flags_removed_fail(folder: Path) -> None:
    def unflag(data: dict) -> None:
        data["results"]["out-2"]["files"][0]["sdc"] = {"summary": {}, "cells": {}}
        data["results"]["out-2"]["properties"]["mitigation"] = "none"

    edit_json(folder, "results.json", unflag)
    problems = verify(folder)
    assert any("flags other cells" in p for p in problems) and any("mitigation" in p for p in problems)


def test_config_threshold_edit_fails(folder: Path) -> None:
    def weaker(data: dict) -> None:
        assert data["rules"]["threshold"] == 5
        data["rules"]["threshold"] = 1
        for rules in data["rules_by_output"].values():
            rules["threshold"] = 1

    edit_json(folder, "config.json", weaker)
    problems = verify(folder)
    assert any(p.startswith("config.json: the rules of out-1 differ") for p in problems)
    # and summary.html, rebuilt from results.json and config.json, no longer matches either
    assert any(p.startswith("summary.html") for p in problems)


def test_summary_edit_fails_even_after_recomputing_checksums(folder: Path) -> None:
    page = (folder / "summary.html").read_text()
    (folder / "summary.html").write_text(page.replace("suppressed", "pass"))
    rehash(folder, "summary.html")
    assert verify(folder) == ["summary.html: differs from the page results.json and config.json give (it was edited)"]


def test_certificate_without_tables_fails(folder: Path) -> None:
    def strip(cert: dict) -> None:
        cert["tables"] = []

    edit_json(folder, "out-2.certificate.json", strip)
    assert any("no protection tables to re-audit" in p for p in verify(folder))

    def remove(cert: dict) -> None:
        del cert["tables"]

    edit_json(folder, "out-2.certificate.json", remove)
    assert any("'tables'" in p for p in verify(folder))


def test_certificate_stripped_to_look_primary_only_fails(folder: Path) -> None:
    """Tables, intervals and 'secondary' removed: a count table's hidden cells still need their tables."""
    def disguise(cert: dict) -> None:
        assert cert["call"] == "groupby.size"
        cert["tables"] = []
        for item in cert["hidden"]:
            item.pop("interval", None)
            item["reasons"] = ["threshold"]

    edit_json(folder, "out-2.certificate.json", disguise)
    assert any("no protection tables to re-audit" in p for p in verify(folder))


def test_hidden_cells_dropped_from_the_certificate_fail(folder: Path) -> None:
    def drop_hidden(cert: dict) -> None:
        cert["hidden"] = []
        cert["tables"] = []

    edit_json(folder, "out-2.certificate.json", drop_hidden)
    assert any("every displayed cell must be listed once" in p for p in verify(folder))


def test_hidden_cell_published_in_csv_and_certificate_fails(folder: Path) -> None:
    """Fill a hidden cell in the CSV and move it to 'published': the protection tables still hide it."""
    cert = json.loads((folder / "out-2.certificate.json").read_text())
    item = cert["hidden"][0]
    cert["hidden"] = cert["hidden"][1:]
    cert["published"].append({"position": item["position"], "row": item["row"], "column": item["column"],
                              "value": 3})
    (folder / "out-2.certificate.json").write_text(json.dumps(cert))
    lines = (folder / "out-2.csv").read_text().splitlines()
    i, j = item["position"]
    cells = lines[i + 1].split(",")
    cells[j + 1] = "3"
    lines[i + 1] = ",".join(cells)
    (folder / "out-2.csv").write_text("\n".join(lines) + "\n")
    rehash(folder, "out-2.certificate.json", "out-2.csv")
    problems = verify(folder)
    assert any(f"hides cell {item['row']} / {item['column']}, but the CSV publishes it" in p for p in problems)


def test_certificate_publishing_a_cell_the_csv_hides_fails(folder: Path) -> None:
    """Issue 10 item 6: the joint audit hid a cell after the model was built; the model still lists its value."""
    cert = json.loads((folder / "out-2.certificate.json").read_text())
    table = cert["tables"][0]
    safe = {tuple(sorted(c["labels"])): c for c in table["cells"] if c["status"] == "safe" and "Total" not in c["labels"]}
    item = next(p for p in cert["published"] if tuple(sorted(p["row"].split(" / ") + [p["column"]])) in safe)
    cert["published"].remove(item)
    cert["hidden"].append({"position": item["position"], "row": item["row"], "column": item["column"],
                           "reasons": ["secondary"]})
    (folder / "out-2.certificate.json").write_text(json.dumps(cert))
    lines = (folder / "out-2.csv").read_text().splitlines()
    i, j = item["position"]
    cells = lines[i + 1].split(",")
    cells[j + 1] = ""
    lines[i + 1] = ",".join(cells)
    (folder / "out-2.csv").write_text("\n".join(lines) + "\n")
    rehash(folder, "out-2.certificate.json", "out-2.csv")
    problems = verify(folder)
    assert any(f"publishes cell {item['row']} / {item['column']} with a value, but the CSV hides it" in p
               for p in problems), problems


def test_table_cells_with_positions_are_matched_exactly(folder: Path) -> None:
    """Certificates that name each table cell's displayed position are checked without label matching."""
    cert = json.loads((folder / "out-2.certificate.json").read_text())
    table = cert["tables"][0]
    by_labels = {tuple(sorted(p["row"].split(" / ") + [p["column"]])): p for p in cert["published"] + cert["hidden"]}
    for cell in table["cells"]:
        item = by_labels.get(tuple(sorted(cell["labels"])))
        if item is not None:
            cell["position"] = item["position"]
            cell["labels"] = ["x" + str(v) for v in cell["labels"]]  # labels no longer match anything
    target = next(c for c in table["cells"] if c["status"] == "safe" and "position" in c)
    (folder / "out-2.certificate.json").write_text(json.dumps(cert))
    rehash(folder, "out-2.certificate.json")
    assert not any("publishes cell" in p for p in verify(folder))
    i, j = target["position"]
    item = next(p for p in cert["published"] if p["position"] == [i, j])
    cert["published"].remove(item)
    cert["hidden"].append({"position": [i, j], "row": item["row"], "column": item["column"], "reasons": ["secondary"]})
    (folder / "out-2.certificate.json").write_text(json.dumps(cert))
    lines = (folder / "out-2.csv").read_text().splitlines()
    cells = lines[i + 1].split(",")
    cells[j + 1] = ""
    lines[i + 1] = ",".join(cells)
    (folder / "out-2.csv").write_text("\n".join(lines) + "\n")
    rehash(folder, "out-2.certificate.json", "out-2.csv")
    assert any(f"publishes cell {item['row']} / {item['column']} with a value, but the CSV hides it" in p
               for p in verify(folder))


def test_a_row_added_to_the_csv_fails(folder: Path) -> None:
    with (folder / "out-1.csv").open("a") as fh:
        fh.write("Secret district,1,2,3,4\n")
    rehash(folder, "out-1.csv")
    assert any(p.startswith("out-1.csv: not a") for p in verify(folder))


def test_relabelled_cell_fails(folder: Path) -> None:
    text = (folder / "out-1.csv").read_text()
    first_label = text.splitlines()[1].split(",")[0]
    (folder / "out-1.csv").write_text(text.replace(first_label + ",", first_label + " (n=3),", 1))
    rehash(folder, "out-1.csv")
    assert any("labels of cell" in p for p in verify(folder))


def test_missing_certificate_fails(folder: Path) -> None:
    (folder / "out-1.certificate.json").unlink()
    (folder / "checksums" / "out-1.certificate.json.txt").unlink()
    problems = verify(folder)
    assert any("certificate out-1.certificate.json missing" in p for p in problems)


def test_xlsx_must_match_the_csv(referrals: Any, tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    import pandas as pd

    from sdc_magic.jupyter.session import Session

    session = Session()
    session.capture.install()
    try:
        session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())
    finally:
        session.capture.uninstall()
    session.export(tmp_path / "x", xlsx=True)
    assert verify(tmp_path / "x") == []
    sheet = pd.read_excel(tmp_path / "x" / "out-1.xlsx", dtype=str, keep_default_na=False)
    sheet.iloc[6, 1] = "3"  # a hidden cell, filled in the workbook only
    sheet.to_excel(tmp_path / "x" / "out-1.xlsx", index=False)
    rehash(tmp_path / "x", "out-1.xlsx")
    assert verify(tmp_path / "x") == ["out-1.xlsx: differs from the CSV"]


def test_fast_reaudit_gives_the_scipy_intervals(referrals: Any) -> None:
    """verify's re-audit (one HiGHS model per table) answers exactly what the reference LP answers."""
    import math

    import numpy as np
    import pandas as pd

    from sdc_magic.jupyter.session import Session
    from sdc_magic.protect.certificate import intervals_from_published
    from sdc_magic.protect.certificate import verify_certificate as reference
    from sdc_magic.records.reaudit import intervals
    from sdc_magic.records.reaudit import verify_certificate as fast

    rng = np.random.default_rng(1)
    session = Session()
    session.linking = False
    session.capture.install()
    try:
        session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())
        session.publish(pd.crosstab(referrals.admin2, referrals.age_band, margins=True))
        session.publish(referrals.groupby(["admin2", "case_category"])["days_to_first_service"].sum().unstack())
        frame = pd.DataFrame({"a": rng.integers(0, 30, 900) ** 2 % 30, "b": rng.integers(0, 20, 900),
                              "v": rng.exponential(100, 900)})
        session.publish(frame.groupby(["a", "b"]).size())
        session.publish(frame.groupby(["a", "b"])["v"].sum())
    finally:
        session.capture.uninstall()
    compared = 0
    from sdc_magic.protect.certificate import restated

    for record in session.outputs:
        if not record.certificate:
            continue
        cert = restated(record.certificate, intervals)  # as exported (unshown margins unpublished)
        assert fast(cert) == reference(cert) == []
        for table in cert["tables"]:
            want, got = intervals_from_published(table), intervals(table)
            assert want.keys() == got.keys()
            for k in want:
                for a, b in zip(want[k], got[k], strict=True):
                    assert (math.isinf(a) and math.isinf(b)) or abs(a - b) <= 1e-6 * max(1.0, abs(a))
                compared += 1
            cell = next(c for c in table["cells"] if c["status"] != "safe")
            cell["upper"] = (cell["upper"] or 0) + 5  # a tampered interval fails both ways
            assert fast(cert) and reference(cert)
            cell["upper"] -= 5
    assert compared >= 30


def test_exception_requests_verify(referrals: Any, tmp_path: Path) -> None:
    """An exception request turns an output to review: more cautious, never a failure of verify."""
    import numpy as np
    import pandas as pd

    from sdc_magic.jupyter.session import Session

    rng = np.random.default_rng(0)
    people = pd.DataFrame({"sex": rng.choice(["F", "M"], 300), "band": rng.choice(["60s", "70s", "80s"], 300)})
    session = Session()
    session.linking = False  # each output on its own
    session.capture.install()
    try:
        session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())  # pass
        session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())  # suppressed
        session.set_microdata(["sex", "band"], k=3)
        session.publish(people)  # released row-level frame
    finally:
        session.capture.uninstall()
    for record in session.outputs:
        session.request_exception(record.id, "needed as is")
    assert [r.status for r in session.outputs] == ["review"] * 3
    session.export(tmp_path / "x")
    assert verify(tmp_path / "x") == []


def test_rules_changed_between_outputs_verify(referrals: Any, tmp_path: Path) -> None:
    """config.json carries each output's rules: a session that changed its rules exports and verifies."""
    from sdc_magic.jupyter.session import Session

    session = Session()
    session.linking = False
    session.capture.install()
    try:
        session.publish(referrals.groupby(["admin2", "sex", "age_band"]).size().unstack())
        session.set_rules(threshold=10)
        session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())
        session.set_rules(threshold=3)  # the rules at export time are used by no output
    finally:
        session.capture.uninstall()
    session.export(tmp_path / "x")
    config = json.loads((tmp_path / "x" / "config.json").read_text())
    assert [r["threshold"] for r in config["rules_by_output"].values()] == [5, 10]
    assert config["rules"]["threshold"] == 10
    assert verify(tmp_path / "x") == []


def test_output_ids_naming_files_outside_the_folder_fail(folder: Path) -> None:
    def escape(data: dict) -> None:
        data["results"]["../../outside"] = data["results"]["out-1"]

    edit_json(folder, "results.json", escape)
    assert any("'../../outside' is not an output id" in p for p in verify(folder))
