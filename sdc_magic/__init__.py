"""sdc_magic: statistical disclosure control for every pandas table displayed in Jupyter.

``%load_ext sdc_magic`` once, then write plain pandas. See the README for the rules,
the threat model and the limits. Heavy imports are deferred so that importing the
package (e.g. by a Jupyter server) stays cheap.
"""

from __future__ import annotations

from typing import Any

from .config import PRESETS, Rules, RulesError, preset

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "Rules",
    "RulesError",
    "__version__",
    "export",
    "ledger",
    "load_ipython_extension",
    "preset",
    "unload_ipython_extension",
    "verify",
]


def ledger() -> Any:
    """The session's outputs as a DataFrame (id, cell, kind, status, hidden, exportable, ...)."""
    from .extension import session

    return session().ledger.frame()


def export(folder: Any, force: bool = False, xlsx: bool = False) -> Any:
    """Write this session's cleared outputs, certificates and results.json to ``folder``."""
    from .extension import session

    return session().export(folder, force=force, xlsx=xlsx)


def verify(folder: Any) -> list[str]:
    """Problems found when re-checking an export folder without the data (empty: verified)."""
    from .verification import verify as _verify

    return _verify(folder)


def load_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%load_ext sdc_magic``."""
    from .extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%unload_ext sdc_magic``: restores pandas and IPython exactly."""
    from .extension import unload

    unload(ipython)


# Jupyter entry points. They import nothing at module level: a kernel that imports
# sdc_magic must not pull in jupyter_server or tornado.
def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt lab extension (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "sdc-magic"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The server extension: the ``/sdc-magic/`` routes used by the lab extension."""
    return [{"module": "sdc_magic"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Register the ``/sdc-magic/`` routes (``sdc_magic.server``, imported only here)."""
    from .server import load

    load(server_app)
