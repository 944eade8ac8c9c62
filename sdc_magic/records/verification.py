"""``sdc-magic verify DIR``: re-check an export folder without the data.

1. every file of the folder, in every subfolder, is accounted for: each top-level file
   belongs to an exported output (``<id>.csv``, ``<id>.certificate.json``, ``<id>.xlsx``)
   or is ``results.json``/``config.json``/``summary.html``, and has a matching
   ``checksums/<file>.txt`` (SHA-256); ``checksums/`` holds nothing else; no other
   subfolder, no link;
2. ``results.json`` validates against the shipped JSON Schema, and what it says about
   each output (status, mitigation, flagged cells, outcome) is what the certificate
   proves; ``config.json`` carries each certificate's rules; ``summary.html`` is exactly
   the page rebuilt from ``results.json`` and ``config.json``;
3. each certificate carries what the re-audit needs (every displayed cell once, published
   or hidden; the protection tables when a cell was hidden to protect another);
4. each CSV has the certificate's shape and labels and says exactly what the certificate
   says was published, hidden cells empty; no protection table of the certificate
   publishes a cell that the CSV hides (or hides one that it publishes);
5. each certificate re-audits: the hidden cells' intervals are recomputed by linear
   programming from the published cells and margins alone, published cells add up to
   their margins, and every hidden primary cell keeps its protection;
6. nothing is carried beside what the tool writes, and the rules hold for what is published
   (:mod:`.strict`): no unknown key in a certificate, ``config.json`` or the manifest, no value
   beside a hidden cell, the manifest's checksums match, and every published count meets the
   frequency rule of its own certificate.

Editing any file, even with its checksum recomputed, fails at least one of 2–6. Any
problem is reported with the file it concerns; the exit status is non-zero. The work is
linear in the number of outputs (one pass over the folder, one over ``results.json``).
"""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path
from typing import Any

from .consistency import TABLE_SCHEMA, certificate_shape, check_csv, model_conflicts
from .layout import (
    AUTO_EXCEPTION,
    MANIFEST,
    acro_status,
    files_entry,
    outcome,
    sha256,
    summary_html,
    summary_text,
)
from .reaudit import verify_certificate
from .rederive import mean_units, preset_problems
from .strict import (
    certificate_keys,
    config_keys,
    manifest_problems,
    microdata_keys,
    published_counts,
    result_entry_problems,
    results_keys,
)

MICRODATA_SCHEMA = "sdc_magic.microdata-certificate"
FOLDER_FILES = ("results.json", "config.json", "summary.html")
#: sdc_magic status of an output -> statuses results.json may give it (an exception request turns it to review)
ALLOWED_STATUS = {"pass": {"pass", "review"}, "suppressed": {"suppressed", "review"}, "review": {"review"}}


def results_schema() -> dict[str, Any]:
    return json.loads(resources.files("sdc_magic.records.schemas").joinpath("results.schema.json").read_text("utf-8"))


def _load_json(path: Path, problems: list[str]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path.name}: cannot be read ({exc})")
    except json.JSONDecodeError as exc:
        problems.append(f"{path.name}: not valid JSON ({exc.msg})")
    return None


# ------------------------------------------------------------------ 1. the folder
def _check_files(folder: Path, expected: set[str]) -> list[str]:
    """Every file accounted for: expected top-level files with their checksums, nothing else."""
    problems: list[str] = []
    checks = folder / "checksums"
    top: set[str] = set()
    sums: set[str] = set()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        name = rel.as_posix()
        if path.is_symlink():
            problems.append(f"{name}: a link (an export holds only files)")
        elif path.is_dir():
            if name != "checksums":
                if rel.parts[0] == "checksums":
                    problems.append(f"{name}: a folder inside checksums/ (not part of the export)")
                else:
                    problems.append(f"{name}/: a folder that is not part of the export")
        elif len(rel.parts) == 1:
            if name != MANIFEST:
                top.add(name)
        elif len(rel.parts) == 2 and rel.parts[0] == "checksums":
            if not name.endswith(".txt"):
                problems.append(f"{name}: not a checksum file (checksums/ holds only <file>.txt)")
            else:
                sums.add(rel.parts[1][:-4])
        else:
            problems.append(f"{name}: a file in a subfolder, not part of the export")
    for name in sorted(top - expected):
        problems.append(f"{name}: not part of the export (no output in results.json owns it)")
    for name in sorted(expected - top):
        problems.append(f"{name}: missing")
    for name in sorted(top):
        if name not in sums:
            problems.append(f"{name}: no checksum")
            continue
        try:
            recorded = (checks / f"{name}.txt").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            recorded = ""
        if recorded != sha256(folder / name):
            problems.append(f"{name}: checksum does not match (the file was modified)")
    for name in sorted(sums - top):
        problems.append(f"checksums/{name}.txt: checksum of a missing file")
    return problems


# ------------------------------------------------------------------ 2. results.json against the certificate
def _check_result(uid: str, result: dict[str, Any], cert: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    props = result.get("properties") or {}
    if result.get("uid") != uid or cert.get("id") != uid:
        problems.append(f"results.json: {uid} and its certificate name different outputs")
    if props.get("certificate", f"{uid}.certificate.json") != f"{uid}.certificate.json":
        problems.append(f"results.json: {uid} points at another certificate")
    files = result.get("files") or [{}]
    if files[0].get("name") != cert.get("file"):
        problems.append(f"results.json: {uid} lists {files[0].get('name')!r}, its certificate {cert.get('file')!r}")
    if str(cert.get("schema", "")).startswith(MICRODATA_SCHEMA):
        allowed = {"pass", "review"} if cert.get("status") == "pass" else {"review"}  # an exception request: review
        if result.get("type") != "microdata" or result.get("status") not in allowed:
            problems.append(f"results.json: {uid} does not say what its certificate says")
        return problems + _derived_text(uid, result, props, {})
    status = props.get("sdc_magic_status")
    if status not in ALLOWED_STATUS.get(str(cert.get("status")), set()):
        problems.append(f"results.json: {uid} is {status!r}, its certificate says {cert.get('status')!r}")
    if result.get("status") != acro_status(str(status)):
        problems.append(f"results.json: {uid} has status {result.get('status')!r}, but sdc_magic said {status!r}")
    if status == "review" and not (props.get("exception_request") or result.get("exception")):
        problems.append(f"results.json: {uid} is under review without an exception request")
    hidden = len(cert["hidden"])
    mitigation = "suppress" if hidden or status == "suppressed" else "none"
    if props.get("mitigation") != mitigation:
        problems.append(f"results.json: {uid} mitigation {props.get('mitigation')!r}, the certificate hides "
                        f"{hidden} cell(s)")
    if props.get("hidden", hidden) != hidden or props.get("cells", cert["shape"][0] * cert["shape"][1]) \
            != cert["shape"][0] * cert["shape"][1]:
        problems.append(f"results.json: {uid} cell counts differ from its certificate")
    entry = files_entry(cert["file"], cert)
    flagged = files[0].get("sdc", {})
    if flagged.get("cells") != entry["sdc"]["cells"] or flagged.get("summary") != entry["sdc"]["summary"]:
        problems.append(f"results.json: {uid} flags other cells than its certificate hides")
    if result.get("outcome") != outcome(cert):
        problems.append(f"results.json: {uid} outcome differs from its certificate")
    call = cert.get("call")
    if props.get("method") != (call or "table") or result.get("command") not in ("", call):
        problems.append(f"results.json: {uid} names another call than its certificate ({call!r})")
    problems += _derived_text(uid, result, props, cert)
    return problems


def _derived_text(uid: str, result: dict[str, Any], props: dict[str, Any], cert: dict[str, Any]) -> list[str]:
    """The summary and the exception text are what the tool writes from the output's record."""
    problems = []
    if result.get("summary") != summary_text(props, cert.get("method")):
        problems.append(f"results.json: {uid} summary differs from the one its properties and certificate give")
    request, exception = props.get("exception_request"), result.get("exception")
    automatic = not request and props.get("sdc_magic_status") == "suppressed" and exception == AUTO_EXCEPTION
    if exception != request and not automatic:
        problems.append(f"results.json: {uid} exception differs from its exception request")
    return problems


def verify(folder: str | Path) -> list[str]:
    """Problems found in an export folder (empty: it verifies).

    Never raises on what the folder holds (red team 53b, finding 13: a results.json entry that was
    not an object ended ``sdc-magic verify`` in a traceback): whatever cannot be checked is a
    problem, so the folder does not verify.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder}: not a folder"]
    if not (folder / "results.json").is_file():
        return [f"{folder}: no results.json"]
    try:
        return _verify(folder)
    except Exception as exc:  # a shape no check foresaw: not verified, said in one line
        return [f"{folder}: cannot be checked ({type(exc).__name__}); an export verify cannot read is not verified"]


def _verify(folder: Path) -> list[str]:
    problems: list[str] = []
    results = _load_json(folder / "results.json", problems)
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        return [*problems, *_check_files(folder, set(FOLDER_FILES)),
                "results.json: not an export record (no 'results' object)"]
    try:
        import jsonschema

        jsonschema.validate(results, results_schema())
    except ImportError:  # a core dependency: an installation without it cannot vouch for results.json
        problems.append("results.json: cannot be checked against its schema (the jsonschema package is missing)")
    except Exception as exc:
        problems.append(f"results.json: does not follow the schema ({getattr(exc, 'message', exc)})")
    problems += results_keys(results)
    entries = {uid: r for uid, r in results["results"].items() if not result_entry_problems(str(uid), r)}
    for uid in [u for u in entries if not _simple_name(u)]:
        problems.append(f"results.json: {uid!r} is not an output id (names a file outside the folder)")
        del entries[uid]
    expected = set(FOLDER_FILES)
    for uid in results["results"]:
        if _simple_name(str(uid)):
            expected |= {f"{uid}.csv", f"{uid}.certificate.json"}
            if (folder / f"{uid}.xlsx").is_file():
                expected.add(f"{uid}.xlsx")
    problems += _check_files(folder, expected)
    config = _load_json(folder / "config.json", problems) if (folder / "config.json").is_file() else None
    if not isinstance(config, dict) or not isinstance(config.get("rules"), dict):
        problems.append("config.json: no rules")
        config = {"rules": {}}
    problems += config_keys(config)
    problems += manifest_problems(folder)
    problems += _summary_page(folder, results, config["rules"])
    by_output = config.get("rules_by_output")
    table_rules: list[dict[str, Any]] = []
    for uid, result in entries.items():
        problems += _verify_output(folder, uid, result, by_output, config["rules"], table_rules)
    if table_rules and by_output is not None and config["rules"] not in table_rules:
        problems.append("config.json: its rules are not those of any exported output")
    problems += [f"config.json: {p}" for p in preset_problems(config["rules"])] if config["rules"] else []
    return problems


def _summary_page(folder: Path, results: dict[str, Any], rules: dict[str, Any]) -> list[str]:
    """``summary.html`` is exactly the page ``results.json`` and ``config.json`` give."""
    try:
        page = (folder / "summary.html").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []  # (missing or unreadable: the folder check says so)
    try:
        expected = summary_html(results, rules)
    except Exception:  # a results.json the page cannot be built from (said above, entry by entry)
        return ["summary.html: cannot be rebuilt from results.json"]
    return [] if page == expected else ["summary.html: differs from the page results.json and config.json give "
                                        "(it was edited)"]


def _simple_name(uid: str) -> bool:
    return bool(uid) and not uid.startswith(".") and not any(ch in uid for ch in "/\\:\0")


def _verify_output(folder: Path, uid: str, result: dict[str, Any], by_output: Any, rules: dict[str, Any],
                   table_rules: list[dict[str, Any]]) -> list[str]:
    cert_path = folder / f"{uid}.certificate.json"
    if not cert_path.is_file():
        return [f"{uid}: certificate {cert_path.name} missing"]
    problems: list[str] = []
    cert = _load_json(cert_path, problems)
    if not isinstance(cert, dict):
        return problems or [f"{cert_path.name}: not a certificate"]
    csv_path = folder / f"{uid}.csv"
    if cert.get("file") != csv_path.name:
        return [f"{cert_path.name}: certifies {cert.get('file')!r}, not {csv_path.name}"]
    if not csv_path.is_file():
        return [f"{uid}: {csv_path.name} missing"]
    if str(cert.get("schema", "")).startswith(MICRODATA_SCHEMA):
        problems += [f"{cert_path.name}: {p}" for p in microdata_keys(cert)]
        problems += _check_result(uid, result, cert)
        problems += [f"{csv_path.name}: {p}" for p in _verify_microdata(csv_path, cert)]
        return problems
    if cert.get("schema") != TABLE_SCHEMA:
        return [f"{cert_path.name}: unknown certificate schema {cert.get('schema')!r}"]
    shape_problems = certificate_shape(cert)
    if shape_problems:
        return [f"{cert_path.name}: {p}" for p in shape_problems]
    problems += [f"{cert_path.name}: {p}" for p in [*certificate_keys(cert), *published_counts(cert),
                                                     *preset_problems(cert["rules"]), *mean_units(cert)]]
    table_rules.append(cert["rules"])
    wanted = by_output.get(uid) if isinstance(by_output, dict) else rules
    if wanted != cert["rules"]:
        problems.append(f"config.json: the rules of {uid} differ from those in its certificate")
    problems += _check_result(uid, result, cert)
    try:
        text = csv_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return [*problems, f"{csv_path.name}: cannot be read"]
    problems += check_csv(csv_path.name, text, cert)
    problems += [f"{cert_path.name}: {p}" for p in model_conflicts(cert)]
    xlsx = folder / f"{uid}.xlsx"
    if xlsx.is_file():
        problems += _check_xlsx(xlsx, text)
    problems += [f"{cert_path.name}: {p}" for p in verify_certificate(cert)]
    return problems


#: the parts of a workbook the export writes (pandas through openpyxl): anything else could carry data
XLSX_PARTS = frozenset({"[Content_Types].xml", "_rels/.rels", "docProps/app.xml", "docProps/core.xml",
                        "xl/workbook.xml", "xl/_rels/workbook.xml.rels", "xl/styles.xml", "xl/theme/theme1.xml",
                        "xl/worksheets/sheet1.xml", "xl/sharedStrings.xml"})
#: document properties a workbook of ours leaves empty (free text a viewer shows)
XLSX_TEXT_PROPERTIES = ("title", "subject", "description", "keywords", "category", "identifier", "contentStatus",
                        "version", "language")


def _check_xlsx(path: Path, csv_text: str) -> list[str]:
    """The XLSX copy is one sheet showing exactly the CSV, and nothing else.

    Why every part (red team 53b, finding 07): only the first sheet was read, so a second sheet
    holding all the raw rows verified. A workbook of ours has one sheet, the parts pandas writes
    and no text in its document properties.
    """
    import zipfile

    try:
        import openpyxl
        import pandas as pd

        with zipfile.ZipFile(path) as archive:
            extra = sorted(set(archive.namelist()) - XLSX_PARTS)
        book = openpyxl.load_workbook(path, read_only=True)
        sheets = list(book.sheetnames)
        props = book.properties
        texts = [name for name in XLSX_TEXT_PROPERTIES if getattr(props, name, None)]
        defined = len(book.defined_names) if hasattr(book.defined_names, "__len__") else 0
        book.close()
        sheet = pd.read_excel(path, dtype=str, keep_default_na=False)
        table = pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False)
    except Exception as exc:  # no openpyxl, or not a workbook: it cannot be vouched for
        return [f"{path.name}: cannot be checked against the CSV ({type(exc).__name__})"]
    problems = []
    if len(sheets) != 1:
        problems.append(f"{path.name}: {len(sheets)} sheets ({', '.join(sheets)}); an export's workbook has one sheet")
    if extra:
        problems.append(f"{path.name}: parts an export's workbook does not have ({', '.join(extra[:5])})")
    if texts or defined:
        problems.append(f"{path.name}: document properties or names an export's workbook does not have "
                        f"({', '.join(texts) or 'defined names'})")
    if list(sheet.columns) != list(table.columns) or sheet.to_numpy().tolist() != table.to_numpy().tolist():
        problems.append(f"{path.name}: differs from the CSV")
    return problems


def _verify_microdata(csv_path: Path, cert: dict[str, Any]) -> list[str]:
    """Re-check a released row-level file: k-anonymity (and l-diversity) on the file itself."""
    import pandas as pd

    from ..microdata import check_k_anonymity

    spec = cert.get("microdata") or {}
    keys = spec.get("keys") or []
    try:
        frame = pd.read_csv(csv_path, dtype=str, keep_default_na=True)
    except Exception as exc:  # empty, not a CSV
        return [f"cannot be read as a table ({type(exc).__name__})"]
    missing = [k for k in keys if k not in frame.columns]
    if not keys or missing or not isinstance(keys, list):
        return [f"keys {missing or keys} not in the released file"]
    if list(frame.columns) != cert.get("columns"):
        return [f"its columns ({', '.join(map(str, frame.columns[:8]))}) are not the released columns its "
                "certificate lists"]
    sensitive = (spec.get("l_diversity") or {}).get("sensitive")
    identifying = [c for c in frame.columns if c not in keys and c != sensitive and len(frame) > 1
                   and frame[c].nunique(dropna=True) == len(frame)]
    if identifying:
        return [f"columns unique to each record (identifiers) are released: {', '.join(map(str, identifying))}"]
    l_value = (spec.get("l_diversity") or {}).get("l")
    k = spec.get("k")
    k = k if isinstance(k, int) and not isinstance(k, bool) and k >= 2 else 2  # (a bad k is said by the schema)
    report = check_k_anonymity(frame, keys, k=k, sensitive=sensitive, l=l_value)
    problems = []
    if not report.ok:
        problems.append(f"not {spec.get('k')}-anonymous over {', '.join(keys)}: {report.n_violations} records "
                        "in smaller classes")
    if int(spec.get("n_records", -1)) != report.n_records:
        problems.append(f"{report.n_records} records, the certificate says {spec.get('n_records')}")
    return problems
