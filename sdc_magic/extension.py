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

import sys
from typing import Any

import pandas as pd
from pandas.io.formats.style import Styler

from .capture.display import display_types
from .magics import sdc_magic
from .session import Session

TYPES = (pd.DataFrame, pd.Series, Styler, *display_types())  # engine types by "module.Class" name

_session: Session | None = None
_installed: dict[str, Any] = {}


def session() -> Session:
    """The kernel's session (created on first use, also without IPython)."""
    global _session
    if _session is None:
        from .config import load_config

        loaded = load_config()  # never raises: a bad file gives the strictest rules and a problem
        created = Session(rules=loaded.rules, config_path=loaded.path)
        created.config_problems = list(loaded.problems)  # type: ignore[attr-defined]
        if loaded.memory_mb is not None and hasattr(created.registry, "budget_mb"):
            created.registry.budget_mb = loaded.memory_mb
        _session = created
    return _session


def _frame_finder(ip: Any) -> Any:
    def find(index: pd.Index, unit: str) -> pd.DataFrame | None:
        for value in list(ip.user_ns.values()):
            if isinstance(value, pd.DataFrame) and unit in value.columns:
                if value.index is index or (len(value.index) == len(index) and value.index.equals(index)):
                    return value
        return None

    return find


def load(ip: Any) -> None:
    """Install capture, display handlers and the magic (idempotent); fails closed.

    A problem in the configuration loads the strictest rules and says which file and
    line is wrong; an exception anywhere else while loading withholds every pandas table
    with the reason (``_failsafe``) instead of leaving pandas to show raw values.
    """
    from . import _failsafe

    if _installed or _failsafe.installed():
        reason = _failsafe.installed()
        state = f"every table is WITHHELD ({reason})" if reason else session().rules.describe()
        print(f"sdc_magic is already loaded: {state}")
        return
    try:
        _load(ip)
    except Exception as exc:
        import contextlib
        import traceback

        error = traceback.format_exc()
        with contextlib.suppress(Exception):
            unload(ip)  # whatever was half installed
        _failsafe.install(ip, f"{type(exc).__name__}: {exc}")
        if _session is not None:
            _session.last_error = error
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
        from .ledger import Ledger

        sess.ledger = Ledger(persist=True)  # next to the notebook: survives a kernel restart
    for warning in list(getattr(sess.ledger, "warnings", None) or []):
        _warn(str(warning))
    sess.capture.frame_finder = _frame_finder(ip)
    sess.capture.install()

    def display_handler(obj: Any) -> None:
        from IPython.display import display

        count = getattr(ip, "execution_count", None)
        progress = _Progress(enabled=_widgets_available(ip))
        try:
            published = sess.publish(obj, execution_count=count, progress=progress)
        finally:
            progress.close()
        data = dict(published.data)
        if published.checked is not None and published.checked.hidden_count and _widgets_available(ip):
            try:
                view = _widget_for(ip, sess, published)
                data["application/vnd.jupyter.widget-view+json"] = {
                    "model_id": view.model_id, "version_major": 2, "version_minor": 0}
            except Exception:  # the widget is an extra: the protected table is already in the bundle
                import traceback

                sess.last_error = traceback.format_exc()
        display(data, raw=True, metadata=published.metadata)

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
    _installed["formatters"] = saved
    _installed["print_warning"] = _install_print_warning()
    ip.register_magic_function(sdc_magic, "line", "sdc")
    _installed["ip"] = ip
    source = f" (rules from {sess.config_path})" if sess.config_path else ""
    print(f"sdc_magic loaded — {sess.rules.describe()}{source}. Every displayed pandas table is checked.")


def unload(ip: Any) -> None:
    """Remove every wrapper, printer and magic installed by :func:`load`."""
    global _session
    from . import _failsafe

    _failsafe.remove()
    if not _installed:
        return
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
    if _session is not None:
        _session.capture.uninstall()
    _installed.clear()


class _Progress:
    """A progress bar shown only when protection takes longer than a second.

    It is a widget of its own, closed when checking ends (so no half-protected state is
    ever left on screen); it shows only the engine's stage and fraction, never a value.
    """

    def __init__(self, enabled: bool, delay: float = 1.0) -> None:
        import time

        self.enabled = enabled
        self.start = time.monotonic()
        self.delay = delay
        self.bar: Any = None
        self.label: Any = None
        self.box: Any = None

    def __call__(self, message: str, fraction: float | None = None) -> None:
        import time

        if not self.enabled or time.monotonic() - self.start < self.delay:
            return
        if self.box is None:
            import ipywidgets as W
            from IPython.display import display

            self.bar = W.FloatProgress(min=0.0, max=1.0, description="sdc_magic")
            self.label = W.Label("protecting…")
            self.box = W.HBox([self.bar, self.label])
            display(self.box)
        if fraction is not None:
            self.bar.value = max(0.0, min(1.0, float(fraction)))
        self.label.value = f"{message} (interrupt the kernel to stop: nothing is shown then)"

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None


def _widgets_available(ip: Any) -> bool:
    """Widgets need a kernel with comms (not a terminal IPython)."""
    return getattr(ip, "kernel", None) is not None


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


def _widget_for(ip: Any, sess: Session, published: Any) -> Any:
    from .widget import build

    checked = published.checked
    found, suggester = sess.suggestions(checked, name_of=_name_of(ip))

    def on_use(code: str) -> None:
        ip.set_next_input(code, replace=False)

    def on_exception(reason: str) -> None:
        sess.request_exception(published.id, reason)

    def on_more() -> Any:
        return suggester.more(found, budget=2.0) if suggester is not None else None

    return build(checked, published.id, found, on_use, on_exception, on_more)


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
            if not state["warned"]:
                state["warned"] = True
                sys.stderr.write(
                    "sdc_magic: print()/str() of a pandas table is NOT checked — display the table "
                    "instead (last expression or display(df)). Printed output is never exportable.\n")
            return _original(self) if _original is not None else self.__repr__()

        saved.append((cls, "__str__", had, original))
        cls.__str__ = warn_str
    return saved
