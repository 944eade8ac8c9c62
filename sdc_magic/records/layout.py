"""The export folder's format, shared by the writer (:mod:`.export`) and the checker (:mod:`.verification`).

ACRO's audit-record layout (``results.json`` with per-file SACRO-Viewer flags), the manifest of
what an export wrote, checksums and the ``summary.html`` that is a pure function of
``results.json`` and ``config.json`` (so ``verify`` rebuilds it and any edit shows).
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

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


#: Every export folder lists what it wrote, so ``--force`` replaces only those files.
MANIFEST = ".sdc_export_manifest.json"


#: ``results.json``'s ``exception`` of a suppressed output the analyst asked nothing for
AUTO_EXCEPTION = "Secondary suppression applied automatically; every hidden cell passed the attacker audit."


def summary_text(props: dict[str, Any], method: Any) -> str:
    """An output's ``summary`` in ``results.json``: a function of its properties and its certificate's method.

    So ``verify`` rebuilds it: free text there could carry anything (red team 53b, finding 12).
    """
    lines = [f"sdc_magic status: {props.get('sdc_magic_status')}", f"{props.get('hidden')} of {props.get('cells')} "
             "cells hidden"]
    lines += [f"{check}: {n} cells" for check, n in (props.get("reasons") or {}).items()]
    if method:
        lines.append(f"secondary suppression: {method}; every hidden cell's interval is in the certificate")
    return "\n".join(lines)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def acro_status(status: str) -> str:
    if status == "pass":
        return "pass"
    return "review"  # suppressed (mitigated, audited) or an exception request: a human decides


def files_entry(name: str, cert: dict[str, Any]) -> dict[str, Any]:
    """SACRO-Viewer's per-file flags, from the certificate's hidden cells (one source of truth)."""
    summary: dict[str, int] = {}
    cells: dict[str, list[list[int]]] = {}
    for item in cert.get("hidden", []):
        i, j = item["position"]
        for rule in item.get("reasons", []) or ["secondary"]:
            check = CHECK_NAMES.get(rule, rule)
            summary[check] = summary.get(check, 0) + 1
            cells.setdefault(check, []).append([int(i), int(j)])
    return {"name": name, "sdc": {"summary": summary, "cells": cells}}


def outcome(cert: dict[str, Any]) -> dict[str, dict[str, str]]:
    outcome: dict[str, dict[str, str]] = {}
    for item in cert.get("published", []):
        outcome.setdefault(item["column"], {})[item["row"]] = "ok"
    for item in cert.get("hidden", []):
        checks = "".join(f"{CHECK_NAMES.get(r, r)}; " for r in item.get("reasons", []))
        outcome.setdefault(item["column"], {})[item["row"]] = checks or "hidden; "
    return outcome


def summary_html(results: dict[str, Any], rules: dict[str, Any]) -> str:
    """``summary.html``: a function of ``results.json`` and ``config.json`` only.

    So ``verify`` rebuilds it and any edit of the page shows, checksums or not.
    """
    rows = []
    items = results.get("results", {})
    for uid, res in items.items():
        props = res.get("properties", {})
        status = str(props.get("sdc_magic_status", res.get("status", "")))
        reasons = ", ".join(f"{n} {k}" for k, n in sorted(props.get("reasons", {}).items())) or "—"
        decision = "checker decides (exception requested)" if status == "review" else "cleared by the rules"
        rows.append(
            f"<tr><td>{html.escape(str(uid))}</td><td>{html.escape(status)}</td>"
            f"<td>{html.escape(str(props.get('hidden', '')))} / {html.escape(str(props.get('cells', '')))}</td>"
            f"<td>{html.escape(reasons)}</td><td>{html.escape(str(props.get('exception_request', '')))}</td>"
            f"<td>{html.escape('; '.join(map(str, res.get('comments', []))))}</td><td>{html.escape(decision)}</td>"
            f"<td><a href='{html.escape(str(uid))}.csv'>csv</a> · <a href='{html.escape(str(uid))}.certificate.json'>"
            "certificate</a></td></tr>")
    rules_text = html.escape(json.dumps(rules, indent=1))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>sdc_magic export</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}"
            "table{border-collapse:collapse}</style></head><body>"
            f"<h1>Outputs for checking</h1><p>{len(items)} output(s). Hidden cells are empty in the CSV files; "
            "each certificate lists the published cells, the margins and every hidden cell's audited interval. "
            "Run <code>sdc-magic verify DIR</code> to re-check this folder without the data.</p>"
            "<table><tr><th>output</th><th>status</th><th>hidden</th><th>why</th><th>exception request</th>"
            "<th>comments</th><th>decision</th><th>files</th></tr>" + "".join(rows) + "</table>"
            f"<h2>Rules</h2><pre>{rules_text}</pre></body></html>")
