"""``sdc-magic verify DIR``: re-check an export folder without the data.

1. every file has a matching ``checksums/<file>.txt`` (SHA-256) and vice versa;
2. ``results.json`` validates against the shipped JSON Schema;
3. each CSV says exactly what its certificate says was published, hidden cells empty;
4. each certificate re-audits: the hidden cells' intervals are recomputed by linear
   programming from the published cells and margins alone, published cells add up to
   their margins, and every hidden primary cell keeps its protection.

Any problem is reported with the file it concerns; the exit status is non-zero.
"""

from __future__ import annotations

import csv
import io
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from .certificate import verify_certificate
from .export import sha256


def results_schema() -> dict[str, Any]:
    return json.loads(resources.files("sdc_magic.schemas").joinpath("results.schema.json").read_text("utf-8"))


def _csv_cells(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    return [row[1:] for row in rows[1:]]


def _same_number(shown: str, value: Any) -> bool:
    if value is None:
        return shown == ""
    try:
        return math.isclose(float(shown), float(value), rel_tol=1e-9, abs_tol=1e-9)
    except ValueError:
        return shown == str(value)


def verify(folder: str | Path) -> list[str]:
    """Problems found in an export folder (empty: it verifies)."""
    folder = Path(folder)
    problems: list[str] = []
    if not (folder / "results.json").is_file():
        return [f"{folder}: no results.json"]
    checks = folder / "checksums"
    files = sorted(p for p in folder.iterdir() if p.is_file())
    for path in files:
        record = checks / f"{path.name}.txt"
        if not record.is_file():
            problems.append(f"{path.name}: no checksum")
        elif record.read_text(encoding="utf-8").strip() != sha256(path):
            problems.append(f"{path.name}: checksum does not match (the file was modified)")
    if checks.is_dir():
        for record in checks.glob("*.txt"):
            if not (folder / record.name[:-4]).is_file():
                problems.append(f"{record.name}: checksum of a missing file")
    try:
        results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return [*problems, f"results.json: not valid JSON ({exc.msg})"]
    try:
        import jsonschema

        jsonschema.validate(results, results_schema())
    except ImportError:  # pragma: no cover - jsonschema is a test dependency
        pass
    except Exception as exc:
        problems.append(f"results.json: does not follow the schema ({getattr(exc, 'message', exc)})")
    for uid, result in results.get("results", {}).items():
        cert_path = folder / f"{uid}.certificate.json"
        if not cert_path.is_file():
            problems.append(f"{uid}: certificate {cert_path.name} missing")
            continue
        try:
            cert = json.loads(cert_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            problems.append(f"{cert_path.name}: not valid JSON")
            continue
        csv_path = folder / cert.get("file", f"{uid}.csv")
        if not csv_path.is_file():
            problems.append(f"{uid}: {csv_path.name} missing")
            continue
        if str(cert.get("schema", "")).startswith("sdc_magic.microdata-certificate"):
            problems += [f"{csv_path.name}: {p}" for p in _verify_microdata(csv_path, cert)]
            continue
        grid = _csv_cells(csv_path.read_text(encoding="utf-8"))
        for item in cert.get("published", []):
            i, j = item["position"]
            if i >= len(grid) or j >= len(grid[i]) or not _same_number(grid[i][j], item["value"]):
                problems.append(f"{csv_path.name}: cell {item['row']} / {item['column']} differs from its certificate")
        for item in cert.get("hidden", []):
            i, j = item["position"]
            if i < len(grid) and j < len(grid[i]) and grid[i][j] != "":
                problems.append(f"{csv_path.name}: hidden cell {item['row']} / {item['column']} carries a value")
        flagged = {tuple(p) for f in result.get("files", []) for ps in f.get("sdc", {}).get("cells", {}).values()
                   for p in ps}
        if not flagged <= {tuple(h["position"]) for h in cert.get("hidden", [])}:
            problems.append(f"results.json: {uid} flags cells its certificate does not hide")
        problems += [f"{cert_path.name}: {p}" for p in verify_certificate(cert)]
    return problems


def _verify_microdata(csv_path: Path, cert: dict[str, Any]) -> list[str]:
    """Re-check a released row-level file: k-anonymity (and l-diversity) on the file itself."""
    import pandas as pd

    from .microdata import check_k_anonymity

    spec = cert.get("microdata") or {}
    keys = spec.get("keys") or []
    frame = pd.read_csv(csv_path, dtype=str, keep_default_na=True)
    missing = [k for k in keys if k not in frame.columns]
    if not keys or missing:
        return [f"keys {missing or keys} not in the released file"]
    sensitive = (spec.get("l_diversity") or {}).get("sensitive")
    l_value = (spec.get("l_diversity") or {}).get("l")
    report = check_k_anonymity(frame, keys, k=int(spec.get("k", 3)), sensitive=sensitive, l=l_value)
    problems = []
    if not report.ok:
        problems.append(f"not {spec.get('k')}-anonymous over {', '.join(keys)}: {report.n_violations} records "
                        "in smaller classes")
    if int(spec.get("n_records", -1)) != report.n_records:
        problems.append(f"{report.n_records} records, the certificate says {spec.get('n_records')}")
    return problems
