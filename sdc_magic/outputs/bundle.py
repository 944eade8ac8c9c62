"""The output bundle's own mime type, and harmless messages (no pandas, no IPython).

Every checked output carries ``application/vnd.sdc-magic.v1+json`` (drawn by the lab
extension's renderer) next to its ``text/html`` and ``text/plain`` fallbacks. The
payload holds only protected content, and only strings, integers, booleans and null:
JavaScript writes ``62.0`` back as ``62``, so a float would change the saved JSON and
break the digest that covers it.

The extension's own messages (the banner of ``%load_ext``, ``%sdc status`` …) are
``display_data`` with a ``message`` record: no table value, cleared, so the export guard
and the redactor leave them in place.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MIME = "application/vnd.sdc-magic.v1+json"
SCHEMA = 1

#: The one status vocabulary shown to users (the machine values stay pass/suppressed/review/blocked).
STATUS_LABEL = {
    "pass": "cleared",
    "suppressed": "cleared, cells hidden",
    "review": "needs review",
    "blocked": "blocked",
}


def canonical(payload: Any) -> str:
    """The payload as the digest sees it (key order and spacing fixed; strings kept as written)."""
    if isinstance(payload, str):  # some front-ends may store JSON mime data as text
        try:
            payload = json.loads(payload)
        except ValueError:
            return payload
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def digest(*parts: str) -> str:
    """SHA-256 of the published content (what an output checker can re-hash)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def content_digest(data: dict[str, Any]) -> str:
    """Digest of an output bundle: text/html, text/plain, and the payload when there is one."""

    def text(value: Any) -> str:
        if isinstance(value, list):
            return "".join(value)
        return value if isinstance(value, str) else ""

    parts = [text(data.get("text/html")), text(data.get("text/plain"))]
    if MIME in data:
        parts.append(canonical(data[MIME]))
    return digest(*parts)


def message_bundle(text: str, html: str | None = None, kind: str = "message"
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A harmless message of the extension (no table values): data and metadata, cleared."""
    data: dict[str, Any] = {"text/plain": text}
    if html is not None:
        data["text/html"] = html
    meta = {"sdc_magic": {"schema": SCHEMA, "kind": kind, "status": "pass", "hidden": 0, "cells": 0,
                          "digest": content_digest(data)}}
    return data, meta
