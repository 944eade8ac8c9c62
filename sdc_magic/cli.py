"""Command line: ``sdc-magic run NOTEBOOK... --out DIR`` executes notebooks headless
and prints what was cleared, hidden or blocked in each output."""

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
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args.notebooks, args.out)
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
