"""Session state: the rules in force, the evidence registry, and the record of outputs.

One :class:`Session` per kernel. The display path, the magics and the Python API all
go through it, so a change of rules applies to the next output and every output
records the rules it was checked under.
"""

from __future__ import annotations

import itertools
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .capture import Capture
from .check import Checked, check, digest
from .config import Rules, apply_settings, load_rules, preset
from .registry import Registry
from .render import render_html, render_placeholder, render_plain

METADATA_SCHEMA = 1


@dataclass
class OutputRecord:
    """What the session published for one displayed table."""

    id: str
    status: str
    kind: str
    hidden: int
    cells: int
    call: str | None
    digest: str
    execution_count: int | None
    reasons: dict[str, int] = field(default_factory=dict)


class Session:
    """Rules, registry, capture wrappers and the output record of one kernel."""

    def __init__(self, rules: Rules | None = None, config_path: Path | None = None) -> None:
        if rules is None:
            rules, config_path = load_rules()
        self.rules = rules
        self.config_path = config_path
        self.registry = Registry()
        self.capture = Capture(self.registry, lambda: self.rules)
        self.outputs: list[OutputRecord] = []
        self._ids = itertools.count(1)
        self.last_error: str | None = None
        self.protector: Any = None

    # ------------------------------------------------------------ rules
    def set_rules(self, **settings: Any) -> Rules:
        """Change some rules (validated; an unknown key is an error naming it)."""
        self.rules = apply_settings(self.rules, settings)
        return self.rules

    def use_preset(self, name: str) -> Rules:
        self.rules = preset(name)
        return self.rules

    # ------------------------------------------------------------ checking
    def check(self, obj: Any) -> Checked:
        """Check a table without displaying it (the Python API)."""
        return check(obj, self.registry, self.rules, self.protector)

    def bundle(self, obj: Any, execution_count: int | None = None, record: bool = True
               ) -> tuple[dict[str, str], dict[str, Any]]:
        """The mime bundle and metadata to publish for ``obj``; fails closed.

        Any exception while checking or rendering gives a withheld placeholder; the
        traceback is kept for ``%sdc debug`` and never shown in the output.
        """
        out_id = f"out-{next(self._ids)}" if record else "out-nested"
        try:
            checked = self.check(obj)
            text = render_plain(checked)
            page = render_html(checked)
            meta = self._metadata(out_id, checked, text, page)
        except KeyboardInterrupt:
            text, page = render_placeholder("checking was interrupted")
            meta = self._failure_metadata(out_id, "interrupted", text, page)
        except Exception as exc:  # fail closed
            self.last_error = traceback.format_exc()
            text, page = render_placeholder(f"checking failed ({type(exc).__name__})")
            meta = self._failure_metadata(out_id, f"checking failed ({type(exc).__name__})", text, page)
        if record:
            self.outputs.append(OutputRecord(
                id=out_id, status=meta["status"], kind=meta.get("kind", "error"), hidden=meta.get("hidden", 0),
                cells=meta.get("cells", 0), call=meta.get("call"), digest=meta["digest"],
                execution_count=execution_count, reasons=meta.get("rules_hit", {})))
        return {"text/plain": text, "text/html": page}, {"sdc_magic": meta}

    def plain(self, obj: Any) -> str:
        """text/plain of the protected version (for tables inside lists, tuples, dicts)."""
        return self.bundle(obj, record=False)[0]["text/plain"]

    def _metadata(self, out_id: str, checked: Checked, text: str, page: str) -> dict[str, Any]:
        reasons = []
        frame = checked.frame
        for (i, j), rs in sorted(checked.reasons.items()):
            if not checked.hidden[i, j] and not any(r.rule in ("unverified", "negative", "custom") for r in rs):
                continue
            row = frame.index[i]
            col = frame.columns[j] if isinstance(frame, pd.DataFrame) else frame.name
            item: dict[str, Any] = {"cell": [str(row), str(col)], "position": [i, j],
                                    "hidden": bool(checked.hidden[i, j]),
                                    "reasons": [r.as_dict() for r in rs]}
            interval = checked.intervals.get((i, j))
            if interval is not None:
                item["interval"] = [interval[0], interval[1]]
            reasons.append(item)
        return {
            "schema": METADATA_SCHEMA,
            "id": out_id,
            "status": checked.status,
            "kind": checked.kind,
            "hidden": checked.hidden_count,
            "primary": checked.primary_count,
            "secondary": checked.secondary_count,
            "cells": int(checked.hidden.size),
            "rules_hit": checked.reason_summary(),
            "reasons": reasons,
            "notes": list(dict.fromkeys(checked.notes)),
            "rules": checked.rules.as_dict() if checked.rules else None,
            "call": checked.call,
            "method": checked.method,
            "digest": digest(page, text),
        }

    def _failure_metadata(self, out_id: str, reason: str, text: str, page: str) -> dict[str, Any]:
        return {"schema": METADATA_SCHEMA, "id": out_id, "status": "blocked", "kind": "error", "hidden": 0,
                "cells": 0, "reasons": [], "notes": [reason], "rules": self.rules.as_dict(),
                "digest": digest(page, text)}
