"""``verify`` re-derives what it checks instead of trusting the export (red team 53b, findings 03,
04, 06, 07, 08, 12 and 13).

Every forgery below is resealed the way a careful forger would do it (:func:`forge`): the
certificate and CSV edited, then ``results.json``'s entries, ``config.json``, ``summary.html``,
the checksums and the manifest rebuilt with the product's own layout functions. So only a check
that re-derives (the named preset's rules, the frequency rule on every count-like cell, the
status against the certificate's own facts, strict schemas) can catch it.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.cli import main
from sdc_magic.jupyter.session import Session
from sdc_magic.records.layout import MANIFEST, acro_status, files_entry, outcome, sha256, summary_html
from sdc_magic.records.verification import verify


def forge(folder: Path, results_edit: Any = None) -> None:
    """Reseal ``folder`` after an edit: results.json entries, config.json, summary, checksums, manifest."""
    results = json.loads((folder / "results.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    for uid, res in results["results"].items():
        path = folder / f"{uid}.certificate.json"
        if not isinstance(res, dict) or not path.exists():
            continue
        cert = json.loads(path.read_text())
        if "published" in cert:
            props = res["properties"]
            if props.get("sdc_magic_status") != "review":
                props["sdc_magic_status"] = cert["status"]
            res["status"] = acro_status(props["sdc_magic_status"])
            props["hidden"] = len(cert["hidden"])
            props["cells"] = cert["shape"][0] * cert["shape"][1]
            props["mitigation"] = "suppress" if cert["hidden"] or props["sdc_magic_status"] == "suppressed" else "none"
            res["files"] = [files_entry(cert["file"], cert)]
            res["outcome"] = outcome(cert)
            config.setdefault("rules_by_output", {})[uid] = cert["rules"]
            config["rules"] = cert["rules"]
    if results_edit is not None:
        results_edit(results)
    (folder / "results.json").write_text(json.dumps(results, indent=1))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    if isinstance(config.get("rules"), dict):
        with contextlib.suppress(Exception):  # a results.json the page cannot be built from: left as it was
            (folder / "summary.html").write_text(summary_html(results, config["rules"]), encoding="utf-8")
    sums = folder / "checksums"
    shutil.rmtree(sums, ignore_errors=True)
    sums.mkdir()
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.name != MANIFEST:
            (sums / f"{p.name}.txt").write_text(sha256(p))
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"] = {p.relative_to(folder).as_posix(): sha256(p) for p in folder.rglob("*")
                         if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _people() -> pd.DataFrame:
    from test_engines_redteam import PEOPLE

    return PEOPLE.copy()


def _export(tables: list[Any], folder: Path, rules_name: str = "humanitarian", microdata: bool = False,
            xlsx: bool = True) -> Path:
    session = Session(rules=preset(rules_name))
    session.capture.install()
    try:
        for table in tables:
            session.publish(table())
        if microdata:
            session.set_microdata(["sex"], k=5)
            df = _people()
            session.publish(df[["sex", "district", "income"]])
    finally:
        session.capture.uninstall()
    session.export(folder, xlsx=xlsx)
    assert verify(folder) == [], verify(folder)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    df = _people()
    return _export([lambda: df.groupby(["district", "sex"]).income.mean(),  # out-1 suppressed
                    lambda: pd.crosstab(df.sex, df.flag),  # out-2 pass, counts
                    lambda: df.pivot_table(index="sex", columns="flag", values="income", aggfunc="count"),  # out-3
                    lambda: df.groupby(["district", "sex"]).size()],  # out-4 suppressed
                   tmp_path_factory.mktemp("rederive") / "exp", microdata=True)


@pytest.fixture
def folder(exported: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    return copy


def _cert(folder: Path, uid: str) -> dict[str, Any]:
    return json.loads((folder / f"{uid}.certificate.json").read_text())


def _save(folder: Path, uid: str, cert: dict[str, Any]) -> None:
    (folder / f"{uid}.certificate.json").write_text(json.dumps(cert, indent=1))


def _rewrite_csv(folder: Path, uid: str, cert: dict[str, Any]) -> None:
    """The CSV the certificate describes (hidden cells empty), as a forger writes it."""
    old = pd.read_csv(folder / f"{uid}.csv", dtype=str, keep_default_na=False)
    values = {tuple(p["position"]): p["value"] for p in cert["published"]}
    for (i, j), v in values.items():
        old.iat[i, j + 1] = str(v)
    for h in cert["hidden"]:
        old.iat[h["position"][0], h["position"][1] + 1] = ""
    (folder / f"{uid}.csv").write_text(old.to_csv(index=False, lineterminator="\n"))
    (folder / f"{uid}.xlsx").unlink(missing_ok=True)


def test_the_untouched_export_resealed_verifies(folder: Path) -> None:
    forge(folder)
    assert verify(folder) == []


# ------------------------------------------------------------------ 04: the named preset's rules
def test_rules_lowered_under_the_presets_name_fail(folder: Path) -> None:
    cert = _cert(folder, "out-4")
    cert["rules"]["threshold"] = 1
    _save(folder, "out-4", cert)
    forge(folder)
    problems = verify(folder)
    assert any("preset 'humanitarian'" in p and "threshold" in p for p in problems), problems


def test_an_unknown_preset_name_fails(folder: Path) -> None:
    cert = _cert(folder, "out-2")
    cert["rules"]["preset"] = "lenient"
    _save(folder, "out-2", cert)
    forge(folder)
    assert any("lenient" in p for p in verify(folder))


def test_a_modified_preset_with_valid_rules_still_verifies(tmp_path: Path) -> None:
    """``%sdc rules threshold=10``: the rules say ``humanitarian (modified)`` and are what they are."""
    df = _people()
    session = Session(rules=preset("humanitarian").replace(threshold=10))
    session.capture.install()
    try:
        session.publish(pd.crosstab(df.sex, df.flag))
    finally:
        session.capture.uninstall()
    session.export(tmp_path / "x")
    assert verify(tmp_path / "x") == []


def test_the_strict_rules_of_a_configuration_error_may_not_be_lowered(folder: Path) -> None:
    from sdc_magic.config import STRICT

    cert = _cert(folder, "out-2")
    cert["rules"] = {**STRICT.as_dict(), "threshold": 2}
    _save(folder, "out-2", cert)
    forge(folder)
    assert any("looser than the strict rules" in p for p in verify(folder))


# ------------------------------------------------------------------ 06: counts of any call
@pytest.mark.parametrize("uid", ["out-2", "out-3"])  # crosstab, pivot_table(aggfunc="count")
def test_a_count_table_edited_to_publish_two_fails(folder: Path, uid: str) -> None:
    cert = _cert(folder, uid)
    first, second = cert["published"][0], cert["published"][1]
    total = first["value"] + second["value"]
    first["value"], second["value"] = 2, total - 2  # the margins stay the same
    _save(folder, uid, cert)
    _rewrite_csv(folder, uid, cert)
    forge(folder)
    problems = verify(folder)
    assert any("below the threshold 5" in p for p in problems), problems


# ------------------------------------------------------------------ 03: hidden cells published
def test_a_pass_status_beside_primary_cells_in_its_own_tables_fails(folder: Path) -> None:
    """The mean table's hidden cells published, status pass, but its protection tables kept."""
    cert = _cert(folder, "out-1")
    true = {"B / F": 14.04, "B / M": 14.66, "C / F": 17.605, "C / M": 18.05}
    for h in cert["hidden"]:
        cert["published"].append({"position": h["position"], "row": h["row"], "column": h["column"],
                                  "value": true[h["row"]]})
    cert["hidden"], cert["status"] = [], "pass"
    _save(folder, "out-1", cert)
    _rewrite_csv(folder, "out-1", cert)
    forge(folder)
    problems = verify(folder)
    assert any("out-1" in p and ("primary" in p or "hides" in p or "hidden" in p) for p in problems), problems


def test_a_published_mean_of_fewer_units_than_the_threshold_fails(folder: Path) -> None:
    """A mean's protection table states its sum: sum / mean is the number of units."""
    cert = _cert(folder, "out-1")
    table = cert["tables"][0]
    safe = next(c for c in table["cells"] if c["status"] == "safe" and "Total" not in c["labels"]
                and "total" not in [str(x).lower() for x in c["labels"]])
    row = " / ".join(safe["labels"])
    published = next(p for p in cert["published"] if p["row"] == row)
    published["value"] = safe["value"] / 2  # the mean of two people, by its own sum
    _save(folder, "out-1", cert)
    _rewrite_csv(folder, "out-1", cert)
    forge(folder)
    problems = verify(folder)
    assert any("2 unit" in p and "threshold" in p for p in problems), problems


def test_a_certificate_hiding_a_cell_the_xlsx_shows_fails(folder: Path) -> None:
    import openpyxl

    book = openpyxl.load_workbook(folder / "out-4.xlsx")
    sheet = book.active
    hidden = _cert(folder, "out-4")["hidden"][0]["position"]
    sheet.cell(row=hidden[0] + 2, column=hidden[1] + 2, value="2")
    book.save(folder / "out-4.xlsx")
    forge(folder)
    assert any("out-4.xlsx" in p for p in verify(folder))


# ------------------------------------------------------------------ 07: every sheet
def test_an_extra_sheet_in_the_xlsx_fails(folder: Path) -> None:
    with pd.ExcelWriter(folder / "out-2.xlsx", mode="a", engine="openpyxl") as writer:
        _people().to_excel(writer, sheet_name="raw")
    forge(folder)
    problems = verify(folder)
    assert any("out-2.xlsx" in p and "sheet" in p for p in problems), problems


# ------------------------------------------------------------------ 08: microdata certificates
def _microdata_uid(folder: Path) -> str:
    results = json.loads((folder / "results.json").read_text())["results"]
    return next(uid for uid, r in results.items() if r["type"] == "microdata")


def test_raw_rows_with_identifiers_as_the_released_file_fail(folder: Path) -> None:
    uid = _microdata_uid(folder)
    (folder / f"{uid}.csv").write_text(_people().to_csv(index=False))
    forge(folder)
    problems = verify(folder)
    assert any(uid in p and "columns" in p for p in problems), problems


def test_a_direct_identifier_among_released_columns_fails(folder: Path) -> None:
    uid = _microdata_uid(folder)
    frame = pd.read_csv(folder / f"{uid}.csv")
    frame.insert(0, "person", range(len(frame)))
    frame.to_csv(folder / f"{uid}.csv", index=False)
    cert = _cert(folder, uid)
    cert["microdata"]["columns"] = list(frame.columns)
    _save(folder, uid, cert)
    forge(folder)
    problems = verify(folder)
    assert any("person" in p for p in problems), problems


@pytest.mark.parametrize("edit", ["k=1", "extra key", "unknown key in microdata", "keys empty"])
def test_a_microdata_certificate_is_strict(folder: Path, edit: str) -> None:
    uid = _microdata_uid(folder)
    cert = _cert(folder, uid)
    if edit == "k=1":
        cert["microdata"]["k"] = 1
    elif edit == "extra key":
        cert["note"] = "C's man earns 18.05"
    elif edit == "unknown key in microdata":
        cert["microdata"]["note"] = "C's man earns 18.05"
    else:
        cert["microdata"]["keys"] = []
    _save(folder, uid, cert)
    forge(folder)
    problems = verify(folder)
    assert problems and any(uid in p for p in problems), problems


# ------------------------------------------------------------------ 12: results.json strict
@pytest.mark.parametrize("where", ["top", "tool", "result", "properties", "file", "sdc"])
def test_results_json_carries_no_key_the_tool_does_not_write(folder: Path, where: str) -> None:
    rows = _people().head(3).to_dict(orient="records")

    def add(results: dict[str, Any]) -> None:
        r = results["results"]["out-2"]
        target = {"top": results, "tool": results["tool"], "result": r, "properties": r["properties"],
                  "file": r["files"][0], "sdc": r["files"][0]["sdc"]}[where]
        target["raw"] = rows

    forge(folder, add)
    problems = verify(folder)
    assert any("results.json" in p and "raw" in p for p in problems), problems


def test_results_json_summary_text_is_what_the_certificate_gives(folder: Path) -> None:
    def edit(results: dict[str, Any]) -> None:
        results["results"]["out-2"]["summary"] = "C's man earns 18.05"

    forge(folder, edit)
    assert any("out-2" in p and "summary" in p for p in verify(folder))


# ------------------------------------------------------------------ 13: malformed results.json
@pytest.mark.parametrize("edit", ["entry is a string", "properties is a string", "files is a string",
                                  "results is a list"])
def test_malformed_results_json_is_a_problem_not_a_traceback(folder: Path, edit: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    def change(results: dict[str, Any]) -> None:
        if edit == "entry is a string":
            results["results"]["out-9"] = "blocked"
        elif edit == "properties is a string":
            results["results"]["out-2"]["properties"] = "x"
        elif edit == "files is a string":
            results["results"]["out-2"]["files"] = "x"
        else:
            results["results"] = list(results["results"])

    forge(folder, change)
    problems = verify(folder)
    assert problems and any("results.json" in p for p in problems), problems
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "FAIL" in out.out


def test_the_csv_reader_still_reads_an_untouched_export(exported: Path) -> None:
    """(The forger's CSV writer above writes what the export writes.)"""
    text = (exported / "out-2.csv").read_text()
    assert pd.read_csv(io.StringIO(text)).shape[0] == 2
