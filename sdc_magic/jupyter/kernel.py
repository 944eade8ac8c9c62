"""The kernel's one :class:`Session`, the shell the extension is installed in, and messages.

The display hook (:mod:`.extension`), ``%sdc`` (:mod:`.magics`) and the lab extension's
actions (:mod:`.comm`) all reach the session here, so none of them imports another.
"""

from __future__ import annotations

from typing import Any

from ..outputs.bundle import message_bundle
from .session import Session

_session: Session | None = None
#: the IPython shell the extension is loaded in (None when not loaded)
shell: Any = None


def current() -> Session | None:
    """The session if one was created (no side effect)."""
    return _session


def session() -> Session:
    """The kernel's session (created on first use, also without IPython)."""
    global _session
    if _session is None:
        from ..config import load_config

        loaded = load_config()  # never raises: a bad file gives the strictest rules and a problem
        created = Session(rules=loaded.rules, config_path=loaded.path)
        created.config_problems = list(loaded.problems)  # type: ignore[attr-defined]
        if loaded.memory_mb is not None and hasattr(created.registry, "budget_mb"):
            created.registry.budget_mb = loaded.memory_mb
        _session = created
    return _session


def kernel_available(ip: Any) -> bool:
    """Rich displays and comms need a kernel (not a terminal IPython)."""
    return getattr(ip, "kernel", None) is not None


def message(text: str) -> None:
    """A message of the extension (no table values): a cleared output, so the guard ignores it."""
    ip = shell
    if ip is None or not kernel_available(ip):
        print(text)
        return
    from IPython.display import display

    data, meta = message_bundle(text)
    from ..records import signing

    signature = signing.sign_record(meta["sdc_magic"])
    if signature is not None:  # redact --require-hmac keeps our messages, not hand-made ones
        meta["sdc_magic"]["hmac"] = signature
    display(data, raw=True, metadata=meta)
