"""The ``%sdc`` line magic: rules, presets and the session record.

``%sdc preset NAME``            use a named preset
``%sdc rules``                  print the rules in force
``%sdc rules threshold=5 ...``  change some rules (unknown keys or bad values: an error naming the key)
``%sdc status``                 the outputs of this session and their status
``%sdc exception out-7 "why"``  ask the output checker to release out-7 as it is (status review; a
                                blocked output cannot be released this way and stays blocked)
``%sdc comment out-7 "text"``   a comment for the checker
``%sdc drop out-7``             exclude out-7 from export
``%sdc export [DIR] [--force] [--xlsx] [--only out-1,out-3]``  write cleared outputs of this kernel (or those
                                named), certificates and results.json (default: build/export/<notebook>/)
``%sdc verify DIR``             re-check an export folder without the data
``%sdc microdata keys=sex,birth_year,education k=3 sensitive=hiv_status l=2 max_risk=5``
                                row-level frames displayed afterwards are checked for k-anonymity
                                (and l-diversity); one that passes can be exported with its report
``%sdc debug``                  the last checking error (local only; never in an output)
"""

from __future__ import annotations

import builtins
import shlex
from typing import Any

from ..config import PRESETS, RulesError, known_keys, parse_assignments
from ..records.ledger import NotReleasable

USAGE = __doc__ or ""


def sdc_magic(line: str) -> None:
    """Entry point of ``%sdc``."""
    from .kernel import session

    sess = session()
    words = line.strip().split(None, 1)
    command = words[0] if words else "help"
    rest = words[1] if len(words) > 1 else ""
    try:
        if command == "preset":
            if not rest:
                _say("presets: " + ", ".join(PRESETS))
                return
            sess.use_preset(rest.strip())
            _say(sess.rules.describe())
        elif command == "rules":
            if rest.strip():
                sess.set_rules(**parse_assignments(rest))
            _say(sess.rules.describe() + ("" if rest.strip() else "\nkeys: " + ", ".join(known_keys())))
            if rest.strip() and sess.rules.unit and not _frames_with_column(sess.rules.unit):
                _say(f"warning: unit={sess.rules.unit}: no DataFrame in this notebook has a column "
                     f"{sess.rules.unit!r} yet. Every table of a frame without it will need review; check the "
                     "column's name (the rule was set, as asked)")
        elif command == "status":
            _print_status(sess)
        elif command in ("exception", "comment"):
            args = shlex.split(rest)
            if len(args) < 2:
                raise RulesError(f'usage: %sdc {command} out-N "text"')
            text = " ".join(args[1:])
            if command == "exception":
                record = sess.request_exception(args[0], text)
                from .comm import exception_requested

                exception_requested(record.id, text)  # the output shows "needs review" at once
                _say(f"{record.id}: exception requested; status {record.status} (the output checker decides)")
            else:
                sess.ledger.comment(args[0], text)
                _say(f"{args[0]}: comment recorded")
        elif command == "drop":
            record = sess.ledger.drop(rest.strip())
            _say(f"{record.id}: excluded from export")
        elif command == "export":
            _export(sess, rest)
        elif command == "verify":
            from ..records.verification import verify

            problems = verify(rest.strip())
            _say("\n".join(problems) if problems else f"{rest.strip()}: verified")
        elif command == "microdata":
            settings = parse_assignments(rest)
            keys = [k for k in settings.pop("keys", "").split(",") if k]
            try:
                k = int(settings.pop("k", 3))
                l_value = settings.pop("l", None)
                max_risk = settings.pop("max_risk", None)
                spec = sess.set_microdata(keys, k=k, sensitive=settings.pop("sensitive", None),
                                          l=int(l_value) if l_value is not None else None,
                                          max_risk=float(max_risk) if max_risk is not None else None)
            except ValueError as exc:
                raise RulesError(str(exc)) from None
            if settings:
                raise RulesError(f"unknown microdata setting {next(iter(settings))!r}; "
                                 "use keys, k, sensitive, l, max_risk")
            _say(f"row-level frames: k-anonymity k={spec['k']} over {', '.join(spec['keys'])}"
                  + (f", l-diversity l={spec['l']} of {spec['sensitive']}" if spec.get("sensitive") else ""))
        elif command == "debug":  # a traceback can quote data: printed, never cleared
            builtins.print(sess.last_error or "no checking error in this session")
        else:
            _say(USAGE)
    except (RulesError, KeyError, NotReleasable) as exc:
        raise RulesError(f"%sdc {command}: {exc}") from None
    except Exception as exc:  # e.g. ExportError: a clear message, no traceback
        if type(exc).__name__ == "ExportError":
            raise RulesError(f"%sdc {command}: {exc}") from None
        raise


def _frames_with_column(column: str) -> list[str]:
    """The user's DataFrames (pandas, polars) that have ``column``: names in the notebook's namespace.

    Why (red team 53b, finding 18): ``%sdc rules unit=nosuchcolumn`` was accepted silently and every
    later table turned ``review``. The rule is still set (a frame may be loaded later), with a warning.
    """
    try:
        from IPython import get_ipython

        namespace = dict(getattr(get_ipython(), "user_ns", None) or {})
    except ImportError:  # pragma: no cover - IPython comes with the kernel
        return []
    found = []
    for name, value in namespace.items():
        if name.startswith("_") or type(value).__name__ not in ("DataFrame", "LazyFrame"):
            continue
        try:
            columns = value.collect_schema().names() if type(value).__name__ == "LazyFrame" else list(value.columns)
        except Exception:  # a frame that cannot say its columns cheaply: not counted
            continue
        if column in columns:
            found.append(name)
    return found


def _say(*parts: object) -> None:
    from .kernel import message

    message(" ".join(str(p) for p in parts))


def _print_status(sess: object) -> None:
    outputs = getattr(sess, "outputs", [])
    if not outputs:
        _say("no output checked yet")
        return
    lines = [f"{'id':<8} {'cell':>4} {'status':<11} {'kind':<11} {'hidden':>6} {'cells':>6} {'export':<6} call"]
    for o in outputs:
        cell = "" if o.execution_count is None else str(o.execution_count)
        export = "yes" if o.exportable else "no"
        note = f"  exception: {o.exception}" if o.exception else ""
        lines.append(f"{o.id:<8} {cell:>4} {o.status:<11} {o.kind:<11} {o.hidden:>6} {o.cells:>6} {export:<6} "
                     f"{o.call or ''}{note}")
    _say("\n".join(lines))


def _export(sess: Any, rest: str) -> None:
    """``%sdc export [FOLDER] [--force] [--xlsx] [--only out-1,out-3]``: which outputs, said in words.

    Which outputs (issue 24.2): ``--only`` names them (the panel's Export sends the outputs
    the notebook shows now, saved or not); typed in a cell, the outputs of this kernel but
    those the lab extension said the notebook no longer shows (deleted cell, cleared output;
    see ``comm.gone_from_notebook``). Outputs of earlier kernels are named, not exported.
    Outputs left out are named in words.
    """
    args = shlex.split(rest)
    only: list[str] | None = None
    rest_args: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--only" or a.startswith("--only="):
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else None)
            if value is None:
                raise RulesError("usage: %sdc export [FOLDER] [--force] [--xlsx] [--only out-1,out-3]")
            only = [v for v in (x.strip() for x in value.split(",")) if v]
            i += 1 if "=" in a else 2
            continue
        rest_args.append(a)
        i += 1
    folders = [a for a in rest_args if not a.startswith("--")]
    unknown = [a for a in rest_args if a.startswith("--") and a not in ("--force", "--xlsx")]
    if len(folders) > 1 or unknown:
        raise RulesError(f"usage: %sdc export [FOLDER] [--force] [--xlsx] [--only out-1,out-3]; got {rest.strip()!r} "
                         '(quote a folder with spaces: %sdc export "my dir")')
    known = {r.id for r in sess.outputs}
    if only and not set(only) & known:  # nothing named exists: a typo must not replace an export with nothing
        raise RulesError(f"no output {', '.join(only)} in this notebook's record "
                         f"({_id_range(sorted(known, key=_id_number)) or 'no outputs yet'}); nothing was exported")
    if only is None:
        from .comm import gone_from_notebook

        gone_ids = gone_from_notebook()  # what the front-end said the notebook no longer shows
        scope = [r for r in sess.outputs if r.kernel_session == sess.ledger.token and r.id not in gone_ids]
        gone = [r.id for r in sess.outputs if r.kernel_session == sess.ledger.token and r.id in gone_ids
                and r.exportable]
        earlier = [r for r in sess.outputs if r.kernel_session != sess.ledger.token and r.exportable]
    else:
        scope = [r for r in sess.outputs if r.id in set(only)]
        # this kernel's cleared outputs the notebook no longer shows
        gone = [r.id for r in sess.outputs if r.id not in set(only) and r.exportable
                and r.kernel_session == sess.ledger.token]
        earlier = []
    from .comm import front_end_spoke

    folder = folders[0] if folders else None  # None: one folder per notebook
    left_out: list[str] = []
    written = sess.export(folder, force="--force" in rest_args, xlsx="--xlsx" in rest_args, left_out=left_out,
                          only=[r.id for r in scope])
    if folder is None:
        from ..records.export import default_export_folder

        folder = str(default_export_folder())
    _say(f"exported {len(written)} output(s) to {folder}: " + ", ".join(r.id for r in written))
    skipped = [r.id for r in scope if not r.exportable]
    if skipped:
        _say("not exported (not cleared): " + ", ".join(skipped))
    for why in left_out:
        _say("not exported: " + why)
    if only is not None and (missing := [o for o in only if o not in known]):
        _say("not exported (no such output: no record of these outputs in this notebook's ledger): "
             + ", ".join(missing))
    if gone:
        earlier_gone = f" (and {len(gone) - 10} earlier)" if len(gone) > 10 else ""  # the newest named
        _say("not exported (the notebook no longer shows them: cell deleted, output cleared or replaced "
             f"by a re-run): {', '.join(gone[-10:])}{earlier_gone}")
    if only is None and not front_end_spoke():
        # (a headless run, a front-end without the lab extension): nothing says which outputs the
        # notebook still shows, and the saved file may be older than the run: say so
        _say("no front-end told this kernel which outputs the notebook shows: every cleared output of "
             "this kernel was exported, deleted cells' included; the sdc_magic panel (or --only=) "
             "exports exactly what the notebook shows")
    if earlier:
        _say(f"not exported (made by an earlier kernel; the notebook may no longer show them): "
             f"{', '.join(r.id for r in earlier)}. Re-run their cells, or export from the sdc_magic panel, "
             "which sends the outputs the notebook shows")


def _id_number(out_id: str) -> int:
    tail = out_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _id_range(ids: list[str]) -> str:
    """``out-1 … out-7`` (the ids this notebook has), short."""
    if not ids:
        return ""
    return ids[0] if len(ids) == 1 else f"its outputs are {ids[0]} … {ids[-1]}"
