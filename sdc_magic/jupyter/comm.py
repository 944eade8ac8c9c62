"""The kernel end of the lab extension's actions: a comm target ``sdc_magic``.

The front-end opens one comm per action with ``{"action": ..., "id": "out-7", ...}`` in
the open message; the kernel answers with one message on it and closes it:

* ``exception`` (``reason``): records the request in the ledger, turns the published
  bundle into status ``review`` (same content) and pushes it to the front-end
  (``{"ok": true, "status": "review"}``);
* ``more``: continues the suggestion search of that output
  (``{"ok": true, "suggestions": [...], "more": false}``; the whole list, earlier ones first);
* ``ping``: ``{"ok": true, "known": bool}`` (whether this kernel made that output);
* ``shown`` (``ids``, ``seen``): the outputs the notebook holds now, and every output it has
  held with this kernel, sent whenever that changes (issue 24.2): ``%sdc export`` typed in a
  cell leaves out this kernel's outputs seen but no longer shown (``{"ok": true}``). A cell
  cannot ask while it runs; this arrives before it.

Updates the kernel starts itself (``%sdc exception out-7 "…"``) are pushed by opening a
comm to the front-end's target ``sdc_magic.update`` with ``{"id", "output"}``; a front-end
without the extension simply closes it.

Replies never hold a hidden value: they are built by the same renderers as the outputs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

TARGET = "sdc_magic"
UPDATE_TARGET = "sdc_magic.update"
#: Outputs of this kernel whose actions stay available (the newest ones).
MAX_LIVE = 100


@dataclass
class Live:
    """What an output's actions need: what it published and its suggestion search."""

    data: dict[str, Any]
    metadata: dict[str, Any]
    found: Any = None
    suggester: Any = None


_live: OrderedDict[str, Live] = OrderedDict()
_registered: dict[str, Any] = {}
#: the front-end's last word on which outputs the notebook shows (``ids``) and which it has
#: held with this kernel (``known``: an output it has not received yet is not gone)
_shown: dict[str, frozenset[str]] = {}


def front_end_spoke() -> bool:
    """Whether a front-end has said which outputs the notebook shows (the lab extension does)."""
    return bool(_shown)


def gone_from_notebook() -> set[str]:
    """Ids of outputs the notebook no longer shows (deleted cell, cleared output), as far as
    the front-end has said; empty without a front-end that says."""
    if not _shown:
        return set()
    return set(_shown["known"] - _shown["ids"])


def remember(out_id: str, data: dict[str, Any], metadata: dict[str, Any], found: Any = None,
             suggester: Any = None) -> None:
    _live[out_id] = Live(dict(data), metadata, found, suggester)
    _live.move_to_end(out_id)
    while len(_live) > MAX_LIVE:
        _live.popitem(last=False)


def register(ip: Any) -> bool:
    """Register the comm target in the kernel (no-op without a kernel, e.g. terminal IPython)."""
    kernel = getattr(ip, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False
    manager.register_target(TARGET, _on_open)
    _registered["manager"] = manager
    return True


def unregister() -> None:
    manager = _registered.pop("manager", None)
    if manager is not None:
        manager.targets.pop(TARGET, None)
    _live.clear()
    _shown.clear()


def _on_open(comm: Any, msg: dict[str, Any]) -> None:
    request = (msg.get("content") or {}).get("data") or {}
    try:
        reply = handle(request)
    except Exception as exc:  # never a traceback to the front-end: it can quote data
        from .kernel import session
        from .tracebacks import safe_format_exc

        session().last_error = safe_format_exc()
        reply = {"ok": False, "error": f"the kernel could not do this ({type(exc).__name__}); %sdc debug has details"}
    try:
        comm.send(reply)
    finally:
        comm.close()


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """One action of the front-end; returns the reply (JSON)."""
    from .kernel import session

    action = request.get("action")
    out_id = str(request.get("id") or "")
    live = _live.get(out_id)
    if action == "ping":
        return {"ok": True, "known": live is not None}
    if action == "shown":
        ids, seen = request.get("ids"), request.get("seen", [])
        if not isinstance(ids, list) or not isinstance(seen, list):
            return {"ok": False, "error": "ids, seen: lists of output ids"}
        _shown["ids"] = frozenset(str(i) for i in ids)
        _shown["known"] = frozenset(str(i) for i in seen) | _shown["ids"]
        return {"ok": True}
    if live is None:
        return {"ok": False, "error": "This output was made by an earlier run or another kernel: "
                                      "run its cell again to use these actions."}
    sess = session()
    if action == "exception":
        reason = str(request.get("reason") or "").strip()
        if not reason:
            return {"ok": False, "error": "Give a reason first."}
        from ..records.ledger import NotReleasable

        try:
            record = sess.request_exception(out_id, reason)
        except NotReleasable as refused:  # (its words name the output and the rule, no value)
            return {"ok": False, "error": str(refused)}
        output = rerender(out_id, live, reason)
        push_update(out_id, output)
        return {"ok": True, "status": record.status, "output": output}
    if action == "more":
        if live.suggester is None or live.found is None:
            return {"ok": True, "suggestions": [], "more": False}
        from ..outputs.render import suggestion_payload

        earlier = list(live.found.items)  # more() rewrites the list: earlier answers must stay
        from .session import internal_work

        with internal_work():
            found = live.suggester.more(live.found)
        seen = {s.title for s in earlier}
        found.items = earlier + [s for s in found.items if s.title not in seen]
        with internal_work():  # (what they show is recorded as the first ones were)
            sess.record_suggestions(out_id, found)
        live.found = found
        return {"ok": True, "suggestions": [suggestion_payload(s) for s in found.items],
                "more": not found.exhausted}
    return {"ok": False, "error": f"unknown action {action!r}"}


def rerender(out_id: str, live: Live, reason: str) -> dict[str, Any]:
    """The output's bundle after an exception request: what it published, with status review."""
    from ..outputs.render import with_exception

    data, metadata = with_exception(live.data, live.metadata, reason)
    _sign(metadata["sdc_magic"])
    live.data, live.metadata = data, metadata
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def _sign(record: dict[str, Any]) -> None:
    """Sign the new digest and status as the session signs its outputs (or drop a stale signature)."""
    from ..records import signing

    record.pop("hmac", None)
    signature = signing.sign_record(record)
    if signature is not None:
        record["hmac"] = signature


def push_update(out_id: str, output: dict[str, Any]) -> None:
    """Tell the front-ends that an output changed (they replace it where they hold it)."""
    if "manager" not in _registered:
        return
    try:
        from comm import create_comm

        c = create_comm(target_name=UPDATE_TARGET, data={"id": out_id, "output": output})
        c.close()
    except Exception:  # a front-end without the extension: nothing to update
        pass


def exception_requested(out_id: str, reason: str) -> None:
    """``%sdc exception``: the output of this kernel shows the new status too."""
    live = _live.get(out_id)
    if live is None:
        return
    push_update(out_id, rerender(out_id, live, reason))
