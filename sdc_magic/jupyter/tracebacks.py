"""Tracebacks without data, for ``%sdc debug``.

An exception raised while checking a table may quote the table in its message (a
``KeyError`` naming a cell label with its count, a ``ValueError`` printing an array).
What ``%sdc debug`` shows must never carry table values, so the traceback keeps the
frames (file, line, function and the line of code) and the exception types of the whole
chain, and withholds every exception message. Local variables are never captured.
"""

from __future__ import annotations

import sys
import traceback

WITHHELD = "(message withheld: it may quote table values)"


def _type_name(te: traceback.TracebackException) -> str:
    name = getattr(te, "exc_type_str", None)  # Python 3.13+
    if name:
        return str(name)
    exc_type = getattr(te, "exc_type", None)
    return exc_type.__qualname__ if exc_type is not None else "Exception"


def safe_format_exception(exc: BaseException) -> str:
    """The traceback of ``exc`` (and of its causes) with every message withheld."""
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    parts: list[str] = []
    seen: set[int] = set()

    def emit(t: traceback.TracebackException) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        if t.__cause__ is not None:
            emit(t.__cause__)
            parts.append("\nThe above exception was the direct cause of the following exception:\n\n")
        elif t.__context__ is not None and not t.__suppress_context__:
            emit(t.__context__)
            parts.append("\nDuring handling of the above exception, another exception occurred:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(t.stack.format())
        parts.append(f"{_type_name(t)}: {WITHHELD}\n")

    emit(te)
    return "".join(parts)


def safe_format_exc() -> str:
    """Like :func:`traceback.format_exc`, for the exception being handled, without messages."""
    exc = sys.exc_info()[1]
    if exc is None:
        return "no exception"
    return safe_format_exception(exc)
