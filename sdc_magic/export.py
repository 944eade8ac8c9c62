"""Export cleared outputs for an output checker, in a folder SACRO-Viewer can open.

``%sdc export DIR`` / :func:`export` writes only outputs with status ``pass`` or
``suppressed``, plus ``review`` outputs that carry an exception request (clearly marked
for the checker's decision) — never blocked or uncleared ones. Per table: a CSV (hidden
cells empty, never a value), optionally an XLSX, and ``<id>.certificate.json``. For the
folder: ``results.json`` in the schema of ACRO's audit record, ``config.json`` (the
rules), ``summary.html`` (one page for the checker) and ``checksums/<file>.txt`` (the
SHA-256 of every file, lowercase hex, no newline, as SACRO-Viewer compares them).
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

from .certificate import versions
from .ledger import OutputRecord

RESULTS_VERSION = "1.0.0"  # the ACRO audit-record layout we write (SACRO-Viewer needs >= 0.4)

# our rule names -> the check names output checkers know from ACRO
CHECK_NAMES = {
    "threshold": "MinimumThresholdCheck",
    "zero": "PresenceOfZeroCheck",
    "dominance": "NKCheck",
    "p_percent": "PPercentCheck",
    "dof": "MinimumDoFCheck",
    "extreme": "ExtremeValueCheck",
    "row_threshold": "RowThresholdCheck",
    "secondary": "SecondarySuppression",
    "differencing": "DifferencingCheck",
    "negative": "NegativeValueCheck",
    "custom": "UnknownStatisticCheck",
    "unverified": "UnverifiedValueCheck",
}


class ExportError(RuntimeError):
    """The export cannot be written (e.g. the folder is not empty)."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _acro_status(record: OutputRecord) -> str:
    if record.status == "pass":
        return "pass"
    return "review"  # suppressed (mitigated, audited) or an exception request: a human decides


def _files_entry(record: OutputRecord) -> dict[str, Any]:
    summary: dict[str, int] = {}
    cells: dict[str, list[list[int]]] = {}
    for item in record.hidden_cells:
        i, j = item["position"]
        for reason in item.get("reasons", []):
            name = CHECK_NAMES.get(reason["rule"], reason["rule"])
            summary[name] = summary.get(name, 0) + 1
            cells.setdefault(name, []).append([int(i), int(j)])
    return {"name": f"{record.id}.csv", "sdc": {"summary": summary, "cells": cells}}


def _outcome(record: OutputRecord) -> dict[str, dict[str, str]]:
    cert = record.certificate or {}
    outcome: dict[str, dict[str, str]] = {}
    for item in cert.get("published", []):
        outcome.setdefault(item["column"], {})[item["row"]] = "ok"
    for item in cert.get("hidden", []):
        checks = "".join(f"{CHECK_NAMES.get(r, r)}; " for r in item.get("reasons", []))
        outcome.setdefault(item["column"], {})[item["row"]] = checks or "hidden; "
    return outcome


def _summary_text(record: OutputRecord) -> str:
    lines = [f"sdc_magic status: {record.status}", f"{record.hidden} of {record.cells} cells hidden"]
    lines += [f"{CHECK_NAMES.get(rule, rule)}: {n} cells" for rule, n in sorted(record.reasons.items())]
    if record.method:
        lines.append(f"secondary suppression: {record.method}; every hidden cell's interval is in the certificate")
    return "\n".join(lines)


def results_record(records: list[OutputRecord]) -> dict[str, Any]:
    """``results.json`` in the layout of ACRO's audit record (opens in SACRO-Viewer)."""
    from . import __version__

    results = {}
    for r in records:
        mitigated = r.status == "suppressed" or r.hidden > 0
        exception = r.exception or ""
        if not exception and r.status == "suppressed":
            exception = "Secondary suppression applied automatically; every hidden cell passed the attacker audit."
        results[r.id] = {
            "uid": r.id,
            "status": _acro_status(r),
            "type": "microdata" if r.kind == "microdata" else "table",
            "properties": {"method": r.call or "table", "mitigation": "suppress" if mitigated else "none",
                           "sdc_magic_status": r.status, "certificate": f"{r.id}.certificate.json"},
            "files": [_files_entry(r)],
            "outcome": _outcome(r),
            "command": r.command or r.call or "",
            "summary": _summary_text(r),
            "timestamp": r.timestamp,
            "comments": list(r.comments),
            "exception": exception,
        }
    return {"version": RESULTS_VERSION,
            "tool": {"@type": "SoftwareApplication", "name": "sdc_magic", "version": __version__},
            "results": results}


def _summary_html(records: list[OutputRecord], rules: dict[str, Any]) -> str:
    rows = []
    for r in records:
        reasons = ", ".join(f"{n} {CHECK_NAMES.get(k, k)}" for k, n in sorted(r.reasons.items())) or "—"
        decision = "checker decides (exception requested)" if r.status == "review" else "cleared by the rules"
        rows.append(
            f"<tr><td>{html.escape(r.id)}</td><td>{html.escape(r.status)}</td><td>{r.hidden} / {r.cells}</td>"
            f"<td>{html.escape(reasons)}</td><td>{html.escape(r.exception or '')}</td>"
            f"<td>{html.escape('; '.join(r.comments))}</td><td>{html.escape(decision)}</td>"
            f"<td><a href='{html.escape(r.id)}.csv'>csv</a> · <a href='{html.escape(r.id)}.certificate.json'>"
            "certificate</a></td></tr>")
    rules_text = html.escape(json.dumps(rules, indent=1))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>sdc_magic export</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}"
            "table{border-collapse:collapse}</style></head><body>"
            f"<h1>Outputs for checking</h1><p>{len(records)} output(s). Hidden cells are empty in the CSV files; "
            "each certificate lists the published cells, the margins and every hidden cell's audited interval. "
            "Run <code>sdc-magic verify DIR</code> to re-check this folder without the data.</p>"
            "<table><tr><th>output</th><th>status</th><th>hidden</th><th>why</th><th>exception request</th>"
            "<th>comments</th><th>decision</th><th>files</th></tr>" + "".join(rows) + "</table>"
            f"<h2>Rules</h2><pre>{rules_text}</pre></body></html>")


def export(records: list[OutputRecord], folder: str | Path, rules: dict[str, Any], *, force: bool = False,
           xlsx: bool = False) -> list[OutputRecord]:
    """Write the exportable outputs to ``folder``; return the records written."""
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()) and not force:
        raise ExportError(f"{folder} is not empty: choose an empty folder or use --force")
    folder.mkdir(parents=True, exist_ok=True)
    if force:
        for old in folder.glob("*"):
            if old.is_file():
                old.unlink()
        checks = folder / "checksums"
        if checks.is_dir():
            for old in checks.glob("*.txt"):
                old.unlink()
    chosen = [r for r in records if r.exportable and r.csv is not None and r.certificate is not None]
    for r in chosen:
        (folder / f"{r.id}.csv").write_text(r.csv, encoding="utf-8")
        (folder / f"{r.id}.certificate.json").write_text(json.dumps(r.certificate, indent=1), encoding="utf-8")
        if xlsx:
            _write_xlsx(folder / f"{r.id}.xlsx", r.csv)
    (folder / "results.json").write_text(json.dumps(results_record(chosen), indent=1), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"rules": rules, "versions": versions()}, indent=1),
                                        encoding="utf-8")
    (folder / "summary.html").write_text(_summary_html(chosen, rules), encoding="utf-8")
    checks = folder / "checksums"
    checks.mkdir(exist_ok=True)
    for path in sorted(folder.iterdir()):
        if path.is_file():
            (checks / f"{path.name}.txt").write_text(sha256(path), encoding="utf-8")
    return chosen


def _write_xlsx(path: Path, csv_text: str) -> None:
    import io

    import pandas as pd

    pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False).to_excel(path, index=False)


def table_csv(checked: Any) -> str:
    """The published table as CSV: one index column (levels joined), hidden cells empty.

    SACRO-Viewer highlights body row ``row`` and column ``col + 1`` of a CSV, assuming one
    header row and one index column, so multi-level labels are joined with " / ".
    """
    import numpy as np
    import pandas as pd

    frame = checked.frame
    grid = frame.to_frame() if isinstance(frame, pd.Series) else frame
    values = grid.to_numpy(dtype=object).copy()
    values[np.asarray(checked.hidden, dtype=bool)] = ""
    if checked.rounded:
        for idx in zip(*np.nonzero(~np.asarray(checked.hidden, dtype=bool)), strict=True):
            v = values[idx]
            if isinstance(v, int | float | np.integer | np.floating) and float(v).is_integer():
                values[idx] = int(round(float(v) / checked.rounded) * checked.rounded)
    index = [" / ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in grid.index]
    columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in grid.columns]
    name = " / ".join(str(n) for n in grid.index.names if n is not None) or ""
    out = pd.DataFrame(values, index=pd.Index(index, name=name), columns=columns)
    return out.to_csv(lineterminator="\n")
