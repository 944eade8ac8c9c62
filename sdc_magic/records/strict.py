"""Strict export files: no unknown keys, no hidden value anywhere, the rules applied again.

Why (issue 23.7): ``verify`` accepted an export rewritten to publish a count of 2 under a
threshold of 5 as ``pass`` (certificate, CSV, ``results.json``, ``summary.html`` rebuilt and the
checksums recomputed), a certificate that stated a hidden cell's value, and extra keys
carrying raw rows in the certificates, ``config.json`` and the export manifest. The re-audit
proves that hidden cells stay hidden; it did not ask whether the published ones may be
published.

* :func:`certificate_keys`, :func:`config_keys`: every key is one the tool writes; a hidden
  cell carries labels, reasons and an interval, never a value.
* :func:`manifest_problems`: the manifest lists exactly the folder's files with their SHA-256
  (its whole content is then checked: there is nothing else for it to carry).
* :func:`published_counts`: the frequency rule applied again, with the certificate's own
  rules, to every published cell of a count statistic (a whole number from 1 to
  threshold − 1, or a zero under ``zeros="suppress"``, fails). The statistic is the one the
  certificate names (its call, its protection tables' statistics): someone who rewrites that
  too is stopped only by a signature, which exports do not carry yet (see docs/known-gaps.md).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .layout import MANIFEST, sha256

CERTIFICATE_KEYS = frozenset({"schema", "id", "file", "status", "digest", "rules", "method", "call", "shape",
                              "published", "hidden", "tables", "versions", "assumptions"})
PUBLISHED_KEYS = frozenset({"position", "row", "column", "value"})
HIDDEN_KEYS = frozenset({"position", "row", "column", "reasons", "interval"})
TABLE_KEYS = frozenset({"measure", "dims", "stat", "method", "audit_ok", "cells", "rounding"})
SAFE_CELL_KEYS = frozenset({"labels", "status", "value"})
HIDDEN_CELL_KEYS = frozenset({"labels", "status", "lower", "upper", "reasons"})
RULE_KEYS = frozenset({"threshold", "zeros", "structural_zeros", "row_threshold", "dominance", "p", "protection",
                       "unit", "categories", "dof", "extremes", "round_to", "singletons", "cost", "preset"})
VERSION_KEYS = frozenset({"sdc_magic", "pandas", "numpy", "python"})
CONFIG_KEYS = frozenset({"rules", "rules_by_output", "versions"})
MANIFEST_KEYS = frozenset({"complete", "files", "pending", "tool", "owner"})
OWNER_KEYS = frozenset({"notebook", "kernel"})
#: statistics whose value is a number of units: the frequency rule applies to it
COUNT_STATS = frozenset({"size", "count", "nunique"})
#: calls whose every cell is a count (or, normalised, a share in [0, 1])
COUNT_CALLS = frozenset({"groupby.size", "groupby.count", "groupby.nunique", "Series.value_counts",
                         "DataFrame.value_counts", "groupby.value_counts"})
#: the last word of another engine's call that counts (polars ``len``, SQL ``count``, ...)
COUNT_WORDS = frozenset({"size", "count", "len", "value_counts", "nunique", "n_unique", "counts"})
#: calls that count unless given values and a statistic: judged as counts when every published
#: cell is a whole number and no protection table names another statistic (red team 53b, 06:
#: a ``pass`` crosstab of counts edited to show 2 was never judged)
MAYBE_COUNT_CALLS = frozenset({"crosstab", "pivot_table", "DataFrame.pivot_table", "groupby.pivot_table"})


def _unknown(where: str, item: Any, allowed: frozenset[str]) -> list[str]:
    if not isinstance(item, dict):
        return [f"{where}: not an object"]
    extra = sorted(str(k) for k in item if k not in allowed)
    return [f"{where}: unknown key(s) {', '.join(extra)} (an export carries only what the tool writes)"] if extra else []


def certificate_keys(cert: dict[str, Any]) -> list[str]:
    """Unknown keys anywhere in a table certificate; a value beside a hidden cell."""
    problems = _unknown("certificate", cert, CERTIFICATE_KEYS)
    problems += _unknown("rules", cert.get("rules", {}), RULE_KEYS)
    problems += _unknown("versions", cert.get("versions", {}), VERSION_KEYS)
    if not all(isinstance(a, str) for a in cert.get("assumptions", []) or []):
        problems.append("assumptions: not a list of sentences")
    for item in cert.get("published", []) or []:
        problems += _unknown(f"published cell {_where(item)}", item, PUBLISHED_KEYS)
    for item in cert.get("hidden", []) or []:
        if isinstance(item, dict) and "value" in item:
            problems.append(f"hidden cell {_where(item)} states its value (a hidden cell carries none)")
        problems += _unknown(f"hidden cell {_where(item)}", item, HIDDEN_KEYS)
    for t, table in enumerate(cert.get("tables", []) or []):
        problems += _unknown(f"table {t}", table, TABLE_KEYS)
        for cell in (table.get("cells", []) if isinstance(table, dict) else []) or []:
            safe = isinstance(cell, dict) and cell.get("status") == "safe"
            if not safe and isinstance(cell, dict) and "value" in cell:
                problems.append(f"table {t}: hidden cell {cell.get('labels')} states its value")
            problems += _unknown(f"table {t} cell", cell, SAFE_CELL_KEYS if safe else HIDDEN_CELL_KEYS)
    return _first(problems)


def config_keys(config: dict[str, Any]) -> list[str]:
    problems = _unknown("config.json", config, CONFIG_KEYS)
    problems += _unknown("config.json versions", config.get("versions", {}), VERSION_KEYS)
    problems += _unknown("config.json rules", config.get("rules", {}), RULE_KEYS)
    by_output = config.get("rules_by_output")
    if isinstance(by_output, dict):
        for uid, rules in by_output.items():
            problems += _unknown(f"config.json rules of {uid}", rules, RULE_KEYS)
    elif by_output is not None:
        problems.append("config.json: rules_by_output is not an object")
    return _first(problems)


def manifest_problems(folder: Path) -> list[str]:
    """The manifest (when present) lists exactly the folder's files, each with its SHA-256."""
    path = folder / MANIFEST
    if not path.exists():
        return []
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return [f"{MANIFEST}: not valid JSON"]
    problems = _unknown(MANIFEST, data, MANIFEST_KEYS)
    if "owner" in data:  # (exports before the owner was recorded have none)
        problems += _owner_problems(data["owner"])
    if problems:
        return problems
    files = data.get("files")
    if not isinstance(files, dict) or data.get("tool") != "sdc_magic" or data.get("complete") is not True \
            or data.get("pending") not in ([], None):
        return [f"{MANIFEST}: not the manifest of a complete export"]
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST}
    if set(files) != present:
        return [f"{MANIFEST}: lists other files than the folder holds"]
    bad = sorted(name for name, digest in files.items() if digest != sha256(folder / name))
    return [f"{MANIFEST}: checksum of {name} does not match" for name in bad[:5]]


def _owner_problems(owner: Any) -> list[str]:
    """The manifest's owner is a notebook stem (or null) and a kernel token: nothing else rides in it."""
    problems = _unknown(f"{MANIFEST} owner", owner, OWNER_KEYS)
    if problems:
        return problems
    kernel, notebook = owner.get("kernel"), owner.get("notebook")
    if not (isinstance(kernel, str) and re.fullmatch(r"[0-9a-f]{1,64}", kernel)) \
            or not (notebook is None or (isinstance(notebook, str) and re.fullmatch(r"[\w.-]{1,255}", notebook))):
        return [f"{MANIFEST}: its owner is not a notebook name and a kernel token"]
    return []


def published_counts(cert: dict[str, Any]) -> list[str]:
    """Published cells of a count statistic that the certificate's own rules hide."""
    rules = cert.get("rules") or {}
    try:
        threshold = float(rules.get("threshold") or 0)
    except (TypeError, ValueError):
        return ["rules: the threshold is not a number"]
    zeros_hidden = rules.get("zeros") == "suppress"
    rounding = rules.get("round_to")
    if isinstance(rounding, int | float) and not isinstance(rounding, bool) and rounding > 0:
        # published figures are rounded: a count at the threshold may show as the multiple below it
        threshold -= rounding / 2
    structural = [str(s) for s in rules.get("structural_zeros") or []]
    # distinct counts of the columns the rules declare categories count no units (``categories``)
    categories = {str(c) for c in rules.get("categories") or [] if isinstance(c, str)}
    problems: list[str] = []
    if counts_every_cell(cert):
        cells = [(f"{item.get('row')} / {item.get('column')}", item.get("value"), [item.get("row"), item.get("column")])
                 for item in cert.get("published", []) if isinstance(item, dict)
                 and not (str(cert.get("call") or "").endswith("nunique") and str(item.get("column")) in categories)]
        problems += _judge(cells, threshold, zeros_hidden, structural)
    for table in cert.get("tables", []) or []:
        if not isinstance(table, dict) or not table.get("stat") or not set(table["stat"]) <= COUNT_STATS:
            continue
        if set(table["stat"]) == {"nunique"} and str(table.get("measure")) in categories:
            continue
        cells = [(" / ".join(map(str, cell.get("labels", []))), cell.get("value"), cell.get("labels", []))
                 for cell in table.get("cells", []) if isinstance(cell, dict) and cell.get("status") == "safe"]
        problems += _judge(cells, threshold, zeros_hidden, structural)
    return _first(problems)


def counts_every_cell(cert: dict[str, Any]) -> bool:
    """Every displayed cell of the certificate is a count (or a share), as far as its facts tell.

    A count call; or a call that counts unless told otherwise (crosstab, pivot table) whose
    published cells are all whole numbers and whose protection tables name no other statistic.
    (A crosstab of sums of whole numbers is judged as counts then: stricter, never looser.)
    """
    call = str(cert.get("call") or "")
    if call in COUNT_CALLS or call.replace(" ", ".").split(".")[-1] in COUNT_WORDS:
        return True
    if call not in MAYBE_COUNT_CALLS:
        return False
    stats = {s for t in cert.get("tables") or [] if isinstance(t, dict) for s in (t.get("stat") or [])}
    if stats - COUNT_STATS:
        return False
    values = [item.get("value") for item in cert.get("published") or [] if isinstance(item, dict)]
    values = [v for v in values if v is not None]
    return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                                and v == math.floor(v) for v in values)


def _judge(cells: list[tuple[str, Any, list[Any]]], threshold: float, zeros_hidden: bool,
           structural: list[str]) -> list[str]:
    cells = [c for c in cells if c[1] is not None]  # an empty cell (a combination without rows: NaN)
    values = [v for _, v, _ in cells]
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != len(values):
        odd = next(repr(v) for v in values if not isinstance(v, int | float) or isinstance(v, bool))
        return [f"a published count is not a number ({odd[:40]})"]
    if numbers and all(0 <= v <= 1 for v in numbers) and any(v != math.floor(v) for v in numbers):
        return []  # shares (normalize=True): the shares rule is judged by the re-audit of their counts
    problems = []
    for (name, _, labels), v in zip(cells, numbers, strict=True):
        if not math.isfinite(v) or v != math.floor(v) or v < 0:
            problems.append(f"published count {name} = {v:g} is not a number of units")
        elif 0 < v < threshold:
            problems.append(f"published count {name} = {v:g} is below the threshold {threshold:g} of its own rules")
        elif v == 0 and zeros_hidden and not _is_structural(labels, structural):
            problems.append(f"published count {name} is an empty cell, which its own rules (zeros hidden) hide")
    return problems


def _is_structural(labels: list[Any], structural: list[str]) -> bool:
    parts = {p.strip() for label in labels for p in str(label).split("/")}
    return any(set(s.split("/")) <= parts for s in structural)


def _where(item: Any) -> str:
    return f"{item.get('row')} / {item.get('column')}" if isinstance(item, dict) else "?"


def _first(problems: list[str], n: int = 10) -> list[str]:
    """At most ``n`` problems, then how many more (a rewritten file can have thousands)."""
    return problems if len(problems) <= n else [*problems[:n], f"... and {len(problems) - n} more"]


# ------------------------------------------------------------------ results.json (finding 12)
RESULTS_KEYS = frozenset({"version", "tool", "results"})
TOOL_KEYS = frozenset({"@type", "name", "version"})
RESULT_KEYS = frozenset({"uid", "status", "type", "properties", "files", "outcome", "command", "summary",
                         "timestamp", "comments", "exception"})
PROPERTY_KEYS = frozenset({"method", "mitigation", "sdc_magic_status", "certificate", "hidden", "cells",
                           "exception_request", "reasons"})
FILE_KEYS = frozenset({"name", "sdc"})
SDC_KEYS = frozenset({"summary", "cells"})
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
_CALL = re.compile(r"[A-Za-z_][\w. ]{0,63}")


def results_keys(results: Any) -> list[str]:
    """Every key of ``results.json`` is one the tool writes, at every level (red team 53b, 12:
    the whole raw data rode in an extra key of an output, its properties or its file entry).

    The analyst's own words (comments, the exception request) are free text by design; every
    other value has the form the tool gives it.
    """
    problems = _unknown("results.json", results, RESULTS_KEYS)
    if not isinstance(results, dict):
        return problems
    tool = results.get("tool")
    if tool is not None:
        problems += _unknown("results.json tool", tool, TOOL_KEYS)
        if isinstance(tool, dict) and tool.get("name") != "sdc_magic":
            problems.append("results.json tool: not sdc_magic")
    entries = results.get("results")
    if not isinstance(entries, dict):
        return [*problems, "results.json: 'results' is not an object of outputs"]
    for uid, entry in entries.items():
        problems += result_entry_problems(str(uid), entry)
    return _first(problems)


def result_entry_problems(uid: str, entry: Any) -> list[str]:
    """One output's entry of ``results.json``: its keys and the form of each value."""
    where = f"results.json {uid}"
    if not isinstance(entry, dict):
        return [f"{where}: not an output record (an object), but {type(entry).__name__}"]
    problems = _unknown(where, entry, RESULT_KEYS)
    props = entry.get("properties")
    problems += _unknown(f"{where} properties", props, PROPERTY_KEYS)
    files = entry.get("files")
    if not isinstance(files, list) or len(files) != 1:
        problems.append(f"{where}: files is not a list of its one file")
    else:
        problems += _unknown(f"{where} file", files[0], FILE_KEYS)
        if isinstance(files[0], dict) and "sdc" in files[0]:
            problems += _unknown(f"{where} file sdc", files[0]["sdc"], SDC_KEYS)
    for key in ("command", "summary", "timestamp", "exception"):
        if key in entry and not isinstance(entry[key], str):
            problems.append(f"{where}: {key} is not text")
    if not (isinstance(entry.get("comments"), list) and all(isinstance(c, str) for c in entry["comments"])):
        problems.append(f"{where}: comments is not a list of text")
    if isinstance(entry.get("timestamp"), str) and not _TIMESTAMP.fullmatch(entry["timestamp"]):
        problems.append(f"{where}: timestamp is not a time")
    if isinstance(entry.get("command"), str) and entry["command"] and not _CALL.fullmatch(entry["command"]):
        problems.append(f"{where}: command is not the name of a call")
    if isinstance(props, dict):
        reasons = props.get("reasons", {})
        if not isinstance(reasons, dict) or not all(
                isinstance(k, str) and re.fullmatch(r"[A-Za-z_]{1,40}", k) and isinstance(n, int)
                and not isinstance(n, bool) and n >= 0 for k, n in reasons.items()):
            problems.append(f"{where} properties: reasons is not a count per rule")
        for key in ("hidden", "cells"):
            if key in props and not (isinstance(props[key], int) and not isinstance(props[key], bool)):
                problems.append(f"{where} properties: {key} is not a number of cells")
        for key in ("method", "mitigation", "sdc_magic_status", "certificate", "exception_request"):
            if key in props and not isinstance(props[key], str):
                problems.append(f"{where} properties: {key} is not text")
        if isinstance(props.get("method"), str) and not _CALL.fullmatch(props["method"]):
            problems.append(f"{where} properties: method is not the name of a call")
    return problems


# ------------------------------------------------------------------ microdata certificates (finding 08)
MICRODATA_CERT_KEYS = frozenset({"schema", "id", "file", "status", "digest", "microdata", "versions", "columns"})
MICRODATA_KEYS = frozenset({"schema", "source", "k", "keys", "convention", "n_records", "violations_after",
                            "k_anonymous", "l_diversity", "suppressions", "suppressions_percent",
                            "suppressions_total", "importance", "risk", "noise", "seed", "seed_withheld",
                            "seed_sha256"})
L_DIVERSITY_KEYS = frozenset({"sensitive", "l", "violations"})
RISK_METHOD = "distance-based matching: true record among the "
#: the smallest k the kernel releases a row-level frame under (``%sdc microdata k=``)
MIN_K = 2


def microdata_keys(cert: dict[str, Any]) -> list[str]:
    """A row-level release's certificate: only what the tool writes, each value of its form."""
    from ..microdata.certificate import SCHEMA, SOURCE
    from ..microdata.kanon import CONVENTION

    problems = _unknown("certificate", cert, MICRODATA_CERT_KEYS)
    problems += _unknown("versions", cert.get("versions", {}), VERSION_KEYS)
    spec = cert.get("microdata")
    problems += _unknown("microdata", spec, MICRODATA_KEYS)
    if not isinstance(spec, dict):
        return _first(problems)
    if cert.get("status") != "pass":
        problems.append("a row-level release is exported only when it passed")
    if not isinstance(cert.get("columns"), list) or not all(isinstance(c, str) for c in cert["columns"]):
        problems.append("columns: the released columns are not listed")
    fixed = {"schema": SCHEMA, "source": SOURCE, "convention": CONVENTION}
    problems += [f"microdata {key}: not the text the tool writes" for key, text in fixed.items()
                 if spec.get(key) != text]
    k = spec.get("k")
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= MIN_K):
        problems.append(f"microdata k: {k!r}, the kernel releases only with k >= {MIN_K}")
    keys = spec.get("keys")
    if not (isinstance(keys, list) and keys and all(isinstance(x, str) for x in keys)):
        problems.append("microdata keys: not a list of column names")
    if spec.get("violations_after") != 0 or spec.get("k_anonymous") is not True:
        problems.append("microdata: not k-anonymous (a release that is not is never exported)")
    if "l_diversity" in spec:
        problems += _unknown("microdata l_diversity", spec["l_diversity"], L_DIVERSITY_KEYS)
    for key in ("suppressions", "suppressions_percent", "importance"):
        value = spec.get(key, {})
        if not (isinstance(value, dict) and all(isinstance(v, int | float) for v in value.values())
                and set(value) <= set(keys if isinstance(keys, list) else [])):
            problems.append(f"microdata {key}: not a number per key")
    for key in ("risk", "noise"):
        report = spec.get(key)
        if isinstance(report, dict) and key == "risk":  # the method is a sentence of the tool's, with numbers
            method = report.get("method")
            if not (isinstance(method, str) and len(method) <= 400 and method.startswith(RISK_METHOD)):
                problems.append("microdata risk: its method is not the tool's")
            report = {k: v for k, v in report.items() if k != "method"}
        if key in spec and not _plain_numbers(report):
            problems.append(f"microdata {key}: not a report of numbers")
    return _first(problems)


def _plain_numbers(value: Any, depth: int = 0) -> bool:
    """A report of numbers: nested objects and lists of numbers, flags and short words only."""
    if depth > 4:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and len(k) <= 64 and _plain_numbers(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return len(value) <= 1000 and all(_plain_numbers(v, depth + 1) for v in value)
    return value is None or isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) <= 64)
