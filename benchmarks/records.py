"""Ledger loading and export verification at scale (issue 12: both were super-linear or slow).

    .venv/bin/python benchmarks/records.py [--quick]

* ledger: load N output records plus N updates (each found by id) from a JSON-lines file;
* verify: ``sdc-magic verify`` of an export of N outputs (copies of a passing 14×4 table
  and a suppressed 14×2×4 table with 8 hidden cells, alternating), every check on,
  split into its parts (schema, re-audit, the rest).

Prints a table with the target next to every row; never fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path


def ledger_load(n: int, folder: Path) -> float:
    from sdc_magic.records.ledger import Ledger, OutputRecord

    base = asdict(OutputRecord(id="out-1", status="pass", kind="table", hidden=0, cells=4, call="size",
                               digest="d", execution_count=1, csv="a,b\nx,1\n", certificate={"cells": [1, 2]}))
    lines = [json.dumps({"event": "output", "record": {**base, "id": f"out-{i}"}}) for i in range(1, n + 1)]
    lines += [json.dumps({"event": "update", "record": {**base, "id": f"out-{i}", "comments": ["c"]}})
              for i in range(1, n + 1)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ledger.jsonl").write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    ledger = Ledger(folder)
    for i in range(1, n + 1):
        ledger.get(f"out-{i}")
    return time.perf_counter() - start


def make_export(n: int, folder: Path) -> None:
    from sdc_magic.datasets import make_referrals
    from sdc_magic.jupyter.session import Session
    from sdc_magic.records.export import export

    df = make_referrals()
    session = Session()
    session.linking = False
    session.capture.install()
    try:
        session.publish(df.groupby(["admin2", "case_category"]).size().unstack())  # pass
        session.publish(df.groupby(["admin2", "sex", "age_band"]).size().unstack())  # suppressed
    finally:
        session.capture.uninstall()
    base = [r for r in session.outputs if r.exportable]
    records = []
    for i in range(n):
        r = copy.copy(base[i % len(base)])
        r.id = f"out-{i + 1}"
        r.certificate = {**r.certificate, "id": r.id, "file": f"{r.id}.csv"}
        records.append(r)
    export(records, folder, session.rules.as_dict())


def verify_parts(folder: Path) -> dict[str, float]:
    import jsonschema

    from sdc_magic.records.reaudit import verify_certificate
    from sdc_magic.records.verification import results_schema, verify

    out = {}
    start = time.perf_counter()
    problems = verify(folder)
    out["verify (all checks)"] = time.perf_counter() - start
    assert problems == [], problems[:3]
    results = json.loads((folder / "results.json").read_text())
    start = time.perf_counter()
    jsonschema.validate(results, results_schema())
    out["  of which: JSON Schema of results.json"] = time.perf_counter() - start
    certs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.certificate.json"))]
    start = time.perf_counter()
    for cert in certs:
        verify_certificate(cert)
    out["  of which: LP re-audit of the certificates"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1,000 instead of 5,000")
    args = parser.parse_args()
    n_ledger, n_verify = (1_000, 1_002) if args.quick else (5_000, 5_002)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        rows = [(f"load a ledger of {n_ledger:,} outputs + {n_ledger:,} updates", ledger_load(n_ledger, base / "l"),
                 1.0)]
        make_export(n_verify, base / "e")
        for name, seconds in verify_parts(base / "e").items():
            target = 0.012 * n_verify if name.startswith("verify") else None
            rows.append((f"{name} ({n_verify:,} outputs)" if name.startswith("verify") else name, seconds, target))
    print(f"{'operation':<64} {'seconds':>8}  target")
    for name, seconds, target in rows:
        verdict = "" if target is None else f"≤ {target:g} s {'OK' if seconds <= target else 'MISS'}"
        print(f"{name:<64} {seconds:>8.2f}  {verdict}")


if __name__ == "__main__":
    main()
