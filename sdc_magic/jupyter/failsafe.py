"""Withhold every pandas table when the extension could not load properly.

Loading must never leave tables unprotected: if anything fails while ``%load_ext
sdc_magic`` sets up the session (a broken import, the ledger, capture, a formatter),
the formatters installed here replace every DataFrame, Series and Styler display with a
placeholder that names the reason, instead of letting pandas show raw values. This
module imports only IPython's public display API and pandas, so that it still works
when the rest of the package does not import.
"""

from __future__ import annotations

import html
import sys
from typing import Any

#: (formatter, type, previous printer) of everything installed here, for :func:`remove`.
_saved: list[tuple[Any, type, Any]] = []
_reason: list[str] = []


def table_types() -> tuple[type, ...]:
    """pandas' table types, and the Styler where pandas can make one.

    The Styler needs jinja2, which a kernel-only environment may not have (issue 24): then no
    Styler can exist, and importing its class must not stop tables from being withheld.
    """
    import pandas as pd

    try:
        from pandas.io.formats.style import Styler
    except ImportError:
        return (pd.DataFrame, pd.Series)
    return (pd.DataFrame, pd.Series, Styler)


def placeholder(reason: str) -> tuple[str, str]:
    """Text and HTML of a withheld table (no value of the table is used)."""
    text = (f"[sdc_magic: output withheld — the extension did not load properly ({reason}). "
            "Nothing of the table is shown. Fix the problem printed at %load_ext, then "
            "%unload_ext sdc_magic and %load_ext sdc_magic again.]")
    page = ('<div class="sdc-magic-output" data-status="blocked" style="color:#8b0000;background:#fde8e8;'
            f'padding:4px 8px;border:1px solid #8b0000">{html.escape(text)}</div>')
    return text, page


def metadata(reason: str) -> dict[str, Any]:
    """An ``sdc_magic`` record that no exporter or redactor treats as cleared."""
    return {"sdc_magic": {"schema": 1, "id": "out-withheld", "status": "blocked", "kind": "error",
                          "hidden": 0, "reasons": [], "notes": [f"extension failed to load: {reason}"]}}


def install(ip: Any, reason: str) -> None:
    """Make every pandas display a withheld placeholder (idempotent; undone by :func:`remove`)."""
    if _saved:
        return
    _reason[:] = [reason]
    text, page = placeholder(reason)

    def withhold(obj: Any) -> None:
        from IPython.display import display

        display({"text/plain": text, "text/html": page}, raw=True, metadata=metadata(reason))

    def plain(obj: Any, p: Any, cycle: bool) -> None:
        p.text(text)

    def nothing(obj: Any, *args: Any) -> None:
        return None

    formatter = ip.display_formatter
    for t in table_types():
        _saved.append((formatter.ipython_display_formatter, t,
                       formatter.ipython_display_formatter.for_type(t, withhold)))
        _saved.append((formatter.mimebundle_formatter, t, formatter.mimebundle_formatter.for_type(t, nothing)))
        for mime, fmt in formatter.formatters.items():
            _saved.append((fmt, t, fmt.for_type(t, plain if mime == "text/plain" else nothing)))
    sys.stderr.write(f"sdc_magic: LOADING FAILED ({reason}). Every pandas table is withheld until "
                     "the extension loads correctly.\n")


def installed() -> str | None:
    """The reason tables are being withheld, or None when the failsafe is not active."""
    return _reason[0] if _saved and _reason else None


def remove() -> None:
    """Restore the printers that were in place before :func:`install`."""
    for fmt, t, old in reversed(_saved):
        if old is None:
            fmt.pop(t, None)
        else:
            fmt.for_type(t, old)
    _saved.clear()
    _reason.clear()
