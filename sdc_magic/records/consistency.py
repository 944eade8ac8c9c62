"""One certificate against its own CSV and model: checked by the export before it writes a file
and by ``verify`` after, so the two can never disagree on what a consistent record is.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from typing import Any

TABLE_SCHEMA = "sdc_magic.certificate/1"
#: calls whose cells add up (counts, sums, means through their sums): hidden cells always come with a
#: protection table, so a certificate of one without tables has been stripped
ADDITIVE_CALLS = frozenset({"groupby.size", "groupby.count", "groupby.sum", "groupby.mean", "Series.value_counts",
                            "DataFrame.value_counts"})


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def same_number(shown: str, value: Any) -> bool:
    if value is None:
        return shown == ""
    try:
        return math.isclose(float(shown), float(value), rel_tol=1e-9, abs_tol=1e-9)
    except ValueError:
        return shown == str(value)


# ------------------------------------------------------------------ 3. certificate completeness
def certificate_shape(cert: dict[str, Any]) -> list[str]:
    """The fields the re-audit needs; every displayed cell exactly once."""
    needed = {"id": str, "file": str, "status": str, "rules": dict, "shape": list, "published": list,
              "hidden": list, "tables": list}
    problems = [f"no valid {key!r} (the re-audit needs it)" for key, kind in needed.items()
                if not isinstance(cert.get(key), kind)]
    if problems:
        return problems
    shape = cert["shape"]
    if len(shape) != 2 or not all(isinstance(n, int) and n >= 0 for n in shape):
        return ["'shape' is not [rows, columns]"]
    seen: Counter[tuple[int, int]] = Counter()
    for kind in ("published", "hidden"):
        for item in cert[kind]:
            pos = item.get("position") if isinstance(item, dict) else None
            if not (isinstance(pos, list) and len(pos) == 2 and all(isinstance(p, int) for p in pos)
                    and 0 <= pos[0] < shape[0] and 0 <= pos[1] < shape[1]):
                problems.append(f"a {kind} cell without a valid position")
                continue
            if kind == "published" and "value" not in item:
                problems.append(f"published cell {item.get('row')} / {item.get('column')} has no value")
            seen[(pos[0], pos[1])] += 1
    if problems:
        return problems
    if len(seen) != shape[0] * shape[1] or any(n != 1 for n in seen.values()):
        problems.append(f"lists {sum(seen.values())} cells for a {shape[0]} × {shape[1]} table: every displayed "
                        "cell must be listed once, published or hidden")
    if cert["status"] == "pass" and cert["hidden"]:
        problems.append("status pass with hidden cells")
    audited = [h for h in cert["hidden"] if "interval" in h or "secondary" in (h.get("reasons") or [])
               or cert.get("call") in ADDITIVE_CALLS]
    if audited and not cert["tables"]:
        problems.append(f"{len(audited)} hidden cell(s) were hidden to protect others, but the certificate has no "
                        "protection tables to re-audit")
    for t, table in enumerate(cert["tables"]):
        if not (isinstance(table, dict) and isinstance(table.get("dims"), list) and isinstance(table.get("cells"), list)):
            problems.append(f"table {t}: no dims or cells")
            continue
        n = len(table["dims"])
        for cell in table["cells"]:
            ok = isinstance(cell, dict) and isinstance(cell.get("labels"), list) and len(cell["labels"]) == n
            if ok and cell.get("status") == "safe":
                ok = isinstance(cell.get("value"), int | float) and not isinstance(cell.get("value"), bool)
            elif ok:
                ok = "lower" in cell and "upper" in cell
            if not ok:
                problems.append(f"table {t}: a malformed cell (labels, status, value or interval missing)")
                break
    return problems


# ------------------------------------------------------------------ 4. CSV against certificate
def check_csv(csv_name: str, text: str, cert: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    rows = csv_rows(text)
    n_rows, n_cols = cert["shape"]
    if len(rows) != n_rows + 1 or any(len(r) != n_cols + 1 for r in rows):
        return [f"{csv_name}: not a {n_rows} × {n_cols} table with one header row and one label column, as its "
                "certificate says"]
    header = rows[0]
    for kind in ("published", "hidden"):
        for item in cert[kind]:
            i, j = item["position"]
            shown = rows[i + 1][j + 1]
            where = f"{item.get('row')} / {item.get('column')}"
            if rows[i + 1][0] != str(item.get("row")) or header[j + 1] != str(item.get("column")):
                problems.append(f"{csv_name}: labels of cell {where} differ from its certificate")
            elif kind == "published" and not same_number(shown, item["value"]):
                problems.append(f"{csv_name}: cell {where} differs from its certificate")
            elif kind == "hidden" and shown != "":
                problems.append(f"{csv_name}: hidden cell {where} carries a value")
    return problems


def label_parts(label: Any) -> list[str]:
    return ["Total" if p in ("All", "Total") else p for p in str(label).split(" / ")]


def table_matches(cert: dict[str, Any], table: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], bool]]:
    """Each protection-table cell with the displayed cell it is, and whether that one is hidden.

    A table cell names its displayed cell by ``position`` when the certificate gives it;
    otherwise it is matched by its labels (one per dimension, plus the measure when the
    display has one more level), and only unambiguous matches count.
    """
    displayed = [(item, False) for item in cert["published"]] + [(item, True) for item in cert["hidden"]]
    at = {tuple(item["position"]): (item, hidden) for item, hidden in displayed}
    n = len(table["dims"])
    measure = str(table.get("measure") or "")
    index: dict[tuple[str, ...], list[tuple[dict[str, Any], bool]]] = {}
    for item, hidden in displayed:
        parts = label_parts(item.get("row")) + label_parts(item.get("column"))
        keys = set()
        if len(parts) == n:
            keys.add(tuple(sorted(parts)))
        elif len(parts) == n + 1:
            drop = [k for k, p in enumerate(parts) if p == measure] or range(len(parts))
            keys.update(tuple(sorted(parts[:k] + parts[k + 1:])) for k in drop)
        for key in keys:
            index.setdefault(key, []).append((item, hidden))
    out = []
    for cell in table["cells"]:
        pos = cell.get("position")
        if isinstance(pos, list) and len(pos) == 2:  # the displayed cell, when the certificate says
            found = [at[tuple(pos)]] if tuple(pos) in at else []
        else:
            found = index.get(tuple(sorted(label_parts(" / ".join(map(str, cell["labels"]))))), [])
        if len(found) == 1:
            out.append((cell, found[0][0], found[0][1]))
    return out


def model_conflicts(cert: dict[str, Any]) -> list[str]:
    """Protection-table cells whose displayed cell has the other fate in the CSV."""
    problems: list[str] = []
    for t, table in enumerate(cert["tables"]):
        for cell, item, hidden in table_matches(cert, table):
            where = f"{item.get('row')} / {item.get('column')}"
            if cell["status"] == "safe" and hidden:
                problems.append(f"table {t} publishes cell {where} with a value, but the CSV hides it")
            elif cell["status"] != "safe" and not hidden:
                problems.append(f"table {t} hides cell {where}, but the CSV publishes it: its audit does not hold")
    return problems
