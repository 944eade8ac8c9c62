"""Optional HMAC of clearances, with a per-installation key kept outside the notebook folder.

An output's ``metadata["sdc_magic"]`` carries its status and a digest of its content;
anyone can recompute a digest, so a hand-edited output can carry ``status: pass`` and a
matching digest. With a key, the kernel also writes ``hmac`` = HMAC-SHA256(key, the whole record:
status, digest and every other field), and ``sdc-magic redact --require-hmac`` keeps only outputs whose HMAC checks.

What it protects against: outputs edited by hand in the ``.ipynb`` (or pasted from
elsewhere) by someone who does not hold the key — a colleague, a reviewer, a notebook
passed around. What it does not: anyone who can read the key file (it is the user's
account that holds it: code run in the kernel as the user can sign anything), and a
redaction run without ``--require-hmac`` or on another installation (whose key differs:
there, use ``--ledger``).

Key: ``$SDC_MAGIC_KEY_FILE``, else ``$XDG_CONFIG_HOME/sdc_magic/key``, else
``~/.config/sdc_magic/key``; created on first use with mode 0600 (folder 0700). A key
file that others can read is not used.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

KEY_ENV = "SDC_MAGIC_KEY_FILE"
_cache: dict[str, bytes] = {}


def key_path() -> Path:
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sdc_magic" / "key"


def _private(path: Path) -> bool:
    if os.name != "posix":  # pragma: no cover
        return True
    return not (path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def load_key(create: bool = False) -> bytes | None:
    """The installation key; None when there is none (or it is readable by others, or unreadable)."""
    path = key_path()
    cached = _cache.get(str(path))
    if cached is not None:
        return cached
    try:
        if not path.exists():
            if not create:
                return None
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process made it meanwhile
                pass
            else:
                with os.fdopen(fd, "w") as fh:
                    fh.write(secrets.token_hex(32))
        if not _private(path):
            return None
        key = path.read_text(encoding="ascii").strip().encode("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    if len(key) < 32:
        return None
    _cache[str(path)] = key
    return key


def _message(record: dict[str, Any]) -> bytes:
    """The whole record but its signature, canonically (issue 23.8: a signature over the status
    and digest alone left the record's other fields free to carry anything)."""
    body = {k: v for k, v in record.items() if k != "hmac"}
    return ("sdc_magic-clearance/2\n" + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                                   default=_plain)).encode()


def _plain(value: Any) -> Any:
    """numpy numbers as the JSON numbers a notebook stores them as (the record is read back from it)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def sign_record(record: dict[str, Any]) -> str | None:
    """HMAC of an output's whole metadata record (status, digest and every other field), or None
    without a usable key.

    The kernel stores it as ``metadata["sdc_magic"]["hmac"]``. Never raises: signing is an
    extra, the output is protected either way.
    """
    key = load_key(create=True)
    if key is None:
        return None
    return hmac.new(key, _message(record), hashlib.sha256).hexdigest()


def check_record(record: dict[str, Any]) -> bool:
    """Does the record's ``hmac`` sign the whole record under this installation's key?"""
    key = load_key(create=False)
    signature = record.get("hmac") if isinstance(record, dict) else None
    if key is None or not isinstance(signature, str):
        return False
    expected = hmac.new(key, _message(record), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def sign(digest: str, status: str) -> str | None:
    """The signature of a record holding only a status and a digest (see :func:`sign_record`)."""
    return sign_record({"status": status, "digest": digest})


def check(digest: str, status: str, signature: object) -> bool:
    """Does ``signature`` sign a record holding only this status and digest?"""
    return check_record({"status": status, "digest": digest, "hmac": signature})
