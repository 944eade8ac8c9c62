"""IPython integration: display interception, evidence capture, the ``%sdc`` magic.

Why the ``ipython_display_formatter``: it is the only kernel-side hook that replaces the
*whole* mime bundle (text/plain included) for the last expression of a cell,
``display()``, Stylers and displays from background threads (measured in
``shared/notes/jupyter-stack.md``). It is combined with a text/plain printer (tables
inside lists, tuples and dicts) and with every other mime formatter returning nothing
for pandas types (table-schema JSON, LaTeX and markdown options must not leak).

Everything installed here is recorded and removed by :func:`unload`, which restores
pandas and IPython exactly.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd

from ..capture.display import display_types, protocol_hook
from ..outputs.bundle import message_bundle
from . import comm as _comm
from . import kernel
from .failsafe import table_types
from .kernel import message, session
from .magics import sdc_magic
from .progress_words import ProgressWords
from .session import Session, in_internal_work, remove_added_filters

TYPES = (*table_types(), *display_types())  # engine types by "module.Class" name

_installed: dict[str, Any] = {}
#: items of a dict, list or tuple of the namespace looked at for frames (``_frame_finder``)
MAX_HELD = 64


def _frame_finder(ip: Any) -> Any:
    def find(index: pd.Index, unit: str | None, every: bool | str = False) -> Any:
        """A frame of the user's with this index (and column ``unit``, unless None), or None;
        ``every``: the list of every frame with this index, then of every one whose (unique) index
        holds all these labels (a filter of it), nearest first; ``every="any"`` (a unit column
        looked for, ``capture.column_rows.unit_of_rows``): also frames held in a dict, list or
        tuple of the namespace, and frames with duplicate labels holding these (which cannot be
        aligned, so the caller knows a source it cannot read exists)."""
        values = list(ip.user_ns.values())
        if every == "any":
            values += [x for v in values if isinstance(v, dict | list | tuple) and len(v) <= MAX_HELD
                       for x in (v.values() if isinstance(v, dict) else v)]
        frames = [v for v in values if isinstance(v, pd.DataFrame) and (unit is None or unit in v.columns)]
        same = [v for v in frames
                if v.index is index or (len(v.index) == len(index) and v.index.equals(index))]
        if not every:
            return same[0] if same else None
        found = _every_frame(index, frames, same)
        if every != "any":
            return found
        return itertools.chain(found, (v for v in frames if len(v.index) > len(index) and not v.index.is_unique
                                       and bool(index.isin(v.index).all())))

    return find


def _every_frame(index: pd.Index, frames: list[pd.DataFrame], same: list[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The frames with these labels, then those holding them all, smallest first: the second
    look-up (a scan of every larger frame's labels) only when the caller asks on."""
    yield from same
    if index.is_unique:
        yield from sorted((v for v in frames if len(v.index) > len(index) and v.index.is_unique
                           and bool(index.isin(v.index).all())), key=len)


def load(ip: Any) -> None:
    """Install capture, display handlers and the magic (idempotent); fails closed.

    A problem in the configuration loads the strictest rules and says which file and
    line is wrong; an exception anywhere else while loading withholds every pandas table
    with the reason (``failsafe``) instead of leaving pandas to show raw values.
    """
    from . import failsafe

    if _installed or failsafe.installed():
        reason = failsafe.installed()
        state = f"every table is WITHHELD ({reason})" if reason else session().rules.describe()
        print(f"sdc_magic is already loaded: {state}")
        return
    try:
        _load(ip)
    except Exception as exc:
        import contextlib

        from .tracebacks import safe_format_exc

        error = safe_format_exc()
        with contextlib.suppress(Exception):
            unload(ip)  # whatever was half installed
        failsafe.install(ip, f"{type(exc).__name__}: {exc}")
        if kernel.current() is not None:
            kernel.current().last_error = error
        _installed["failed"] = True
        with contextlib.suppress(Exception):
            ip.register_magic_function(sdc_magic, "line", "sdc")  # %sdc debug still works


def _warn(message: str) -> None:
    """A visible warning in the cell that loaded the extension."""
    sys.stderr.write(f"sdc_magic WARNING: {message}\n")


def _load(ip: Any) -> None:
    _installed["loading"] = True  # from here on, unload undoes whatever was installed
    sess = session()
    for problem in getattr(sess, "config_problems", []):
        _warn(f"configuration not used — {problem}. The STRICTEST rules apply until it is fixed: "
              f"{sess.rules.describe()}")
    if not sess.ledger.persist and not sess.ledger.records:
        from ..records.ledger import Ledger

        sess.ledger = Ledger(persist=True)  # next to the notebook: survives a kernel restart
    take = getattr(sess.ledger, "take_warnings", None)  # shown here once, not again under a table
    for warning in (take() if callable(take) else list(getattr(sess.ledger, "warnings", None) or [])):
        _warn(str(warning))
    sess.capture.frame_finder = _frame_finder(ip)
    sess.capture.install()

    def display_handler(obj: Any) -> None:
        _display(ip, sess, obj)

    def plain_printer(obj: Any, p: Any, cycle: bool) -> None:
        p.text(sess.plain(obj))

    formatter = ip.display_formatter
    saved: list[tuple[Any, type, Any]] = []
    _installed["formatters"] = saved  # recorded as they go: a failure half-way is undone by unload
    for t in TYPES:
        saved.append((formatter.ipython_display_formatter, t,
                      formatter.ipython_display_formatter.for_type(t, display_handler)))
        saved.append((formatter.mimebundle_formatter, t, formatter.mimebundle_formatter.for_type(t, _nothing)))
        for mime, fmt in formatter.formatters.items():
            printer = plain_printer if mime == "text/plain" else _nothing
            saved.append((fmt, t, fmt.for_type(t, printer)))
    for t in NOTE_TYPES:
        saved.append((formatter.mimebundle_formatter, t, formatter.mimebundle_formatter.for_type(t, _note_bundle)))
    _installed["formatters"] = saved
    _installed["protocol"] = protocol_hook(formatter.ipython_display_formatter, display_handler)
    _installed["print_warning"] = _install_print_warning()
    ip.register_magic_function(sdc_magic, "line", "sdc")
    _installed["ip"] = ip
    _installed["custom_exc"] = _install_short_errors(ip)
    kernel.shell = ip
    source = f" (rules from {sess.config_path})" if sess.config_path else ""
    _installed["comm"] = _comm.register(ip)  # the lab extension's actions (exception, more options)
    message(f"sdc_magic loaded — {sess.rules.describe()}{source}. Every displayed pandas table is checked.")


def unload(ip: Any) -> None:
    """Remove every wrapper, printer and magic installed by :func:`load`."""
    from . import failsafe

    failsafe.remove()
    if not _installed:
        return
    if "protocol" in _installed:
        _installed["protocol"]()  # objects exposing __dataframe__ / __arrow_c_stream__
    for fmt, t, old in reversed(_installed.get("formatters", [])):
        if old is None:
            fmt.pop(t, None)
        else:
            fmt.for_type(t, old)
    for owner, name, had, original in _installed.get("print_warning", []):
        if had:
            setattr(owner, name, original)
        else:
            delattr(owner, name)
    magics = ip.magics_manager.magics.get("line", {})
    magics.pop("sdc", None)
    if "custom_exc" in _installed:
        _installed["custom_exc"]()
    if kernel.current() is not None:
        kernel.current().capture.uninstall()
    _comm.unregister()
    remove_added_filters()
    _installed.clear()
    kernel.shell = None


def _display(ip: Any, sess: Session, obj: Any) -> None:
    """Publish one checked table: its bundle (payload for the lab renderer, HTML, text).

    When protection takes long, a transient progress message is shown first and the
    table *replaces* it (same ``display_id``): no progress output is ever left behind,
    and a headless run (nbclient) has nothing to wait for.
    """
    from IPython.display import display, update_display

    count = getattr(ip, "execution_count", None)
    interactive = kernel.kernel_available(ip)
    progress = _Progress(enabled=interactive)
    found: dict[str, Any] = {}

    def suggest(checked: Any) -> Any:
        result, suggester = sess.suggestions(checked, name_of=_name_of(ip))
        found["found"], found["suggester"] = result, suggester
        return result

    published = None
    try:
        published = sess.publish(obj, execution_count=count, progress=progress,
                                 suggest=suggest if interactive else None)
        if published.checked is not None:
            _comm.remember(published.id, published.data, published.metadata, found.get("found"),
                           found.get("suggester"))
    finally:
        if published is not None and progress.display_id is not None:
            update_display(published.data, raw=True, metadata=published.metadata, display_id=progress.display_id)
        else:
            progress.close()
            if published is not None:
                display(published.data, raw=True, metadata=published.metadata)


class _Progress:
    """A progress message shown only when protection takes longer than a second.

    A plain display with a ``display_id``: updated while the engine works, then replaced
    by the table (or cleared to a one-line note if checking is stopped). It shows only the
    engine's stage and fraction, never a value, and is marked as a harmless message.
    """

    def __init__(self, enabled: bool, delay: float = 1.0, every: float = 0.3) -> None:
        import time

        self.enabled = enabled
        self.start = time.monotonic()
        self.delay = delay
        self.every = every
        self.last = 0.0
        self.display_id: str | None = None
        self.words = ProgressWords()

    def __call__(self, message: str, fraction: float | None = None) -> None:
        import time

        now = time.monotonic()
        if not self.enabled:
            return
        words, share = self.words.update(message, fraction)  # every message moves the stage, shown or not
        if now - self.start < self.delay or now - self.last < self.every:
            return
        self.last = now
        import html

        from IPython.display import display, update_display

        text = f"sdc_magic: protecting… {share:.0%}: {words} (interrupt the kernel to stop: nothing is shown then)"
        bar = f'<progress max="1" value="{share:.3f}"></progress> '
        data, meta = message_bundle(text, f'<div class="sdc-magic-progress">{bar}<small>{html.escape(text)}</small></div>',
                                    kind="progress")
        if self.display_id is None:
            import uuid

            self.display_id = f"sdc-progress-{uuid.uuid4().hex}"
            display(data, raw=True, metadata=meta, display_id=self.display_id)
        else:
            update_display(data, raw=True, metadata=meta, display_id=self.display_id)

    def close(self) -> None:
        """Checking stopped without a table: the progress line becomes a short note."""
        if self.display_id is not None:
            from IPython.display import update_display

            data, meta = message_bundle("sdc_magic: checking stopped; nothing of the table is shown.")
            update_display(data, raw=True, metadata=meta, display_id=self.display_id)
            self.display_id = None


def _name_of(ip: Any) -> Any:
    """The user's variable name for a frame (by identity, else a frame with the same columns)."""

    def name_of(frame: pd.DataFrame, keys: list[Any]) -> str | None:
        fallback = None
        for name, value in list(ip.user_ns.items()):
            if name.startswith("_") or not isinstance(value, pd.DataFrame):
                continue
            if value is frame:
                return name
            if fallback is None and all(k in value.columns for k in keys) and value.index.equals(frame.index):
                fallback = name
        return fallback

    return name_of


#: Python values an analyst shows while working (a dict of summary figures, a list, a number, a
#: string, an array). They are not tables the extension can check, so they are never exported;
#: their record says so in plain words, so that a notebook of working notes does not read as a
#: list of failures (issue 24.7). Exact types only: a subclass (``Counter``: a frequency table)
#: keeps its own display and stays "not cleared".
NOTE_TYPES: tuple[type, ...] = (dict, list, tuple, set, frozenset, int, float, complex, bool, str, bytes)
NOTE_WORDS = "a Python value, not a table: shown for your own work, never exported"


def _note_bundle(obj: Any) -> Any:
    """Mime-bundle formatter of :data:`NOTE_TYPES`: no data (the usual formatters still draw the
    value), only the record marking it as a working note. A subclass with a
    ``_repr_mimebundle_`` of its own keeps it."""
    if type(obj) not in NOTE_TYPES:
        from IPython.utils.dir2 import get_real_method

        method = get_real_method(obj, "_repr_mimebundle_")
        return method() if method is not None else None
    return {}, {"sdc_magic": {"schema": 1, "kind": "note", "status": "note", "notes": [NOTE_WORDS]}}


def _nothing(obj: Any, *args: Any) -> None:
    """Formatter that declines: no other mime type is ever produced for pandas objects."""
    return None


def _install_print_warning() -> list[tuple[Any, str, bool, Any]]:
    """Warn once per session when a DataFrame/Series is turned into text by ``print``/``str``.

    ``print`` never goes through IPython's formatters, so it cannot be checked. The
    warning wraps ``__str__`` (which ``print`` and f-strings call, ``repr`` does not).
    """
    saved = []
    state = {"warned": False}
    for cls in (pd.DataFrame, pd.Series):
        had = "__str__" in cls.__dict__
        original = cls.__dict__.get("__str__")

        def warn_str(self: Any, _original: Any = original) -> str:
            if not state["warned"] and not in_internal_work():
                state["warned"] = True
                sys.stderr.write(
                    "sdc_magic: print()/str() of a pandas table is NOT checked — display the table "
                    "instead (last expression or display(df)). Printed output is never exportable.\n")
            return _original(self) if _original is not None else self.__repr__()

        saved.append((cls, "__str__", had, original))
        cls.__str__ = warn_str
    return saved


def _install_short_errors(ip: Any) -> Any:
    """``%sdc`` errors (a bad rule, an export folder in the way) as one line, not a traceback.

    The error is still raised (a notebook run stops there, ``run_cell`` reports it); only its
    display is short, as IPython shows its own UsageError. When the user has a custom
    exception handler of their own, theirs is left alone. Returns the undo.
    """
    from ..config import RulesError

    if getattr(ip, "custom_exceptions", ()) or not hasattr(ip, "set_custom_exc"):
        return lambda: None
    saved = (ip.custom_exceptions, ip.CustomTB)

    def short(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> None:
        sys.stderr.write(f"{etype.__name__}: {value}\n")

    ip.set_custom_exc((RulesError,), short)

    def undo() -> None:
        ip.custom_exceptions, ip.CustomTB = saved

    return undo

