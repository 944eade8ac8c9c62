"""Command line.

``sdc-magic run NOTEBOOK... --out DIR``: execute notebooks headless and print what was
cleared, hidden or blocked in each output.
``sdc-magic redact IN.ipynb OUT.ipynb [--ledger PATH|auto] [--require-hmac]``: a copy keeping
only cleared outputs (with ``--ledger``, only those the session ledger recorded as cleared;
with ``--require-hmac``, only those signed with this installation's key).
``sdc-magic verify DIR``: re-check an export folder without the data (exit 1 on failure).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdc-magic", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute notebooks headless and summarise their outputs")
    run.add_argument("notebooks", nargs="+", type=Path)
    run.add_argument("--out", type=Path, default=Path("build/demo"))
    redact = sub.add_parser("redact", help="copy a notebook keeping only cleared outputs")
    redact.add_argument("source", type=Path)
    redact.add_argument("target", type=Path)
    redact.add_argument("--ledger", help="session ledger (.sdc_magic/NOTEBOOK.jsonl, or 'auto' for the one beside "
                        "the notebook): keep only outputs it recorded as cleared")
    redact.add_argument("--require-hmac", action="store_true",
                        help="keep only outputs signed with this installation's key (see sdc_magic.records.signing)")
    verify = sub.add_parser("verify", help="re-check an export folder without the data")
    verify.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.command == "verify":
        from ..records.verification import verify as verify_folder

        problems = verify_folder(args.folder)
        for p in problems:
            print(f"FAIL {p}")
        print(f"{args.folder}: " + ("verified" if not problems else f"{len(problems)} problem(s)"))
        return 1 if problems else 0
    if args.command == "run":
        return _run(args.notebooks, args.out)
    if args.command == "redact":
        from ..records.redact import ledger_clearances, notebook_ledger, redact_file

        known = None
        if args.ledger:
            ledger = notebook_ledger(args.source) if args.ledger == "auto" else Path(args.ledger)
            try:
                known = ledger_clearances(ledger)
            except OSError as exc:
                print(f"sdc-magic redact: cannot read the ledger {ledger}: {exc.strerror or exc}", file=sys.stderr)
                return 2
        report = redact_file(str(args.source), str(args.target), known_digests=known,
                             require_hmac=args.require_hmac)
        why = ", ".join(f"{n} {r}" for r, n in sorted(report.reasons.items()))
        print(f"{args.target}: kept {report.kept} output(s), removed {report.removed}" + (f" ({why})" if why else "")
              + ("; saved widget state dropped" if report.widget_state_dropped else ""))
        return 0
    return 2


def _run(notebooks: list[Path], out: Path) -> int:
    from .notebooks import execute, format_summary, summarise

    failures = 0
    totals: dict[str, int] = {}
    for path in notebooks:
        nb = execute(path, out / path.name, cwd=path.parent)
        rows = summarise(nb)
        print(format_summary(str(path), rows))
        for r in rows:
            if r.output_type == "error":
                failures += 1
            if r.output_type != "stream":
                totals[r.status] = totals.get(r.status, 0) + 1
    print("outputs by status: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    print(f"executed notebooks written to {out}/")
    if failures:
        print(f"{failures} cell(s) raised an error", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
