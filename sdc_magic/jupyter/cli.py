"""Command line.

``sdc-magic run NOTEBOOK... --out DIR``: execute notebooks headless and print what was
cleared, hidden or blocked in each output.
``sdc-magic redact IN.ipynb OUT.ipynb [--ledger PATH|auto] [--require-hmac] [--force]``: a copy
keeping only cleared outputs (with ``--ledger``, only those the session ledger recorded as
cleared; with ``--require-hmac``, only those signed with this installation's key). OUT is never
IN, and an existing OUT is replaced only with ``--force``.
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
    redact.add_argument("--force", action="store_true",
                        help="replace TARGET if it exists (never the source notebook itself)")
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
        return _redact(args)
    return 2


def _redact(args: argparse.Namespace) -> int:
    """``sdc-magic redact``: one line on stderr and exit 2 for anything that stops it (no traceback)."""
    from ..records.redact import RedactError, ledger_clearances, notebook_ledger, redact_file

    known = None
    if args.ledger:
        ledger = notebook_ledger(args.source) if args.ledger == "auto" else Path(args.ledger)
        try:
            known = ledger_clearances(ledger)
        except OSError as exc:
            print(f"sdc-magic redact: cannot read the ledger {ledger}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    try:
        report = redact_file(args.source, args.target, force=args.force, known_digests=known,
                             require_hmac=args.require_hmac)
    except RedactError as exc:
        print(f"sdc-magic redact: {exc}", file=sys.stderr)
        return 2
    why = ", ".join(f"{n} {r}" for r, n in sorted(report.reasons.items()))
    print(f"{args.target}: kept {report.kept} output(s), removed {report.removed}" + (f" ({why})" if why else "")
          + ("; saved widget state dropped" if report.widget_state_dropped else ""))
    return 0


def _run(notebooks: list[Path], out: Path) -> int:
    """Execute each notebook into ``out``; never over a notebook given (finding 16: ``--out .``
    replaced the source with its executed copy, its earlier outputs lost)."""
    from .notebooks import execute, format_summary, summarise

    sources = {p.resolve() for p in notebooks}
    clashes = [p for p in notebooks if (out / p.name).resolve() in sources or _same_file(p, out / p.name)]
    if clashes:
        print(f"sdc-magic run: the executed copy of {clashes[0]} would replace "
              f"{'the notebook itself' if _same_file(clashes[0], out / clashes[0].name) else 'a notebook given'} "
              f"({out / clashes[0].name}); nothing was run. Choose another --out folder "
              "(the default is build/demo)", file=sys.stderr)
        return 2
    names = [p.name for p in notebooks]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        print(f"sdc-magic run: two notebooks named {twice} would be written to the same {out / twice}; "
              "nothing was run. Run them with different --out folders", file=sys.stderr)
        return 2

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


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file (a link, a hard link, another spelling)."""
    import os

    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
