"""The ``%sdc`` line magic: rules, presets and the session record.

``%sdc preset NAME``            use a named preset
``%sdc rules``                  print the rules in force
``%sdc rules threshold=5 ...``  change some rules (unknown keys or bad values: an error naming the key)
``%sdc status``                 the outputs of this session and their status
``%sdc debug``                  the last checking error (local only; never in an output)
"""

from __future__ import annotations

from .config import PRESETS, RulesError, known_keys, parse_assignments

USAGE = __doc__ or ""


def sdc_magic(line: str) -> None:
    """Entry point of ``%sdc``."""
    from .extension import session

    sess = session()
    words = line.strip().split(None, 1)
    command = words[0] if words else "help"
    rest = words[1] if len(words) > 1 else ""
    try:
        if command == "preset":
            if not rest:
                print("presets: " + ", ".join(PRESETS))
                return
            sess.use_preset(rest.strip())
            print(sess.rules.describe())
        elif command == "rules":
            if rest.strip():
                sess.set_rules(**parse_assignments(rest))
            print(sess.rules.describe())
            if not rest.strip():
                print("keys: " + ", ".join(known_keys()))
        elif command == "status":
            _print_status(sess)
        elif command == "debug":
            print(sess.last_error or "no checking error in this session")
        else:
            print(USAGE)
    except RulesError as exc:
        raise RulesError(f"%sdc {command}: {exc}") from None


def _print_status(sess: object) -> None:
    outputs = getattr(sess, "outputs", [])
    if not outputs:
        print("no output checked yet")
        return
    print(f"{'id':<8} {'status':<11} {'kind':<11} {'hidden':>6} {'cells':>6}  call")
    for o in outputs:
        print(f"{o.id:<8} {o.status:<11} {o.kind:<11} {o.hidden:>6} {o.cells:>6}  {o.call or ''}")
