"""sdc_magic: statistical disclosure control for every pandas table displayed in Jupyter.

``%load_ext sdc_magic`` once, then write plain pandas. See the README for the rules,
the threat model and the limits. Heavy imports are deferred so that importing the
package (e.g. by a Jupyter server) stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

from .config import PRESETS, Rules, RulesError, __version__, preset

__all__ = [
    "PRESETS",
    "Rules",
    "RulesError",
    "__version__",
    "export",
    "ledger",
    "load_ipython_extension",
    "preset",
    "protect",
    "unload_ipython_extension",
    "verify",
]


class _PublicFunction:
    """A public function that shares its name with a submodule, and stays callable.

    ``sdc_magic.ledger()`` is the README's API, and ``sdc_magic.ledger`` was a module:
    Python's import system binds a submodule on its package when it is imported, which
    used to replace the function (``'module' object is not callable``). The package
    refuses that rebinding (:class:`_Package`), and this object forwards every other
    attribute to the submodule, so ``sdc_magic.ledger.Ledger`` keeps working too.
    """

    def __init__(self, func: Callable[..., Any], module: str) -> None:
        object.__setattr__(self, "_func", func)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "__doc__", func.__doc__)
        object.__setattr__(self, "__name__", func.__name__)
        object.__setattr__(self, "__wrapped__", func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self._module), name)

    def __setattr__(self, name: str, value: Any) -> None:  # e.g. monkeypatch of a module attribute
        setattr(importlib.import_module(self._module), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(importlib.import_module(self._module), name)

    def __repr__(self) -> str:
        return f"<sdc_magic.{self._func.__name__}: function (module {self._module} behind it)>"


class _Package(types.ModuleType):
    """The ``sdc_magic`` package: public functions are never replaced by submodules."""

    def __setattr__(self, name: str, value: Any) -> None:
        current = self.__dict__.get(name)
        if isinstance(current, _PublicFunction) and isinstance(value, types.ModuleType):
            return  # the import system binding sdc_magic/<name>.py: keep the function
        super().__setattr__(name, value)


def _ledger() -> Any:
    """The session's outputs as a DataFrame (id, cell, kind, status, hidden, exportable, ...)."""
    from .jupyter.kernel import session

    return session().ledger.frame()


def _export(folder: Any = None, force: bool = False, xlsx: bool = False) -> Any:
    """Write this session's cleared outputs, certificates and results.json to ``folder``
    (default: ``build/export/<notebook>/``, one folder per notebook)."""
    from .jupyter.kernel import session

    return session().export(folder, force=force, xlsx=xlsx)


def _verify(folder: Any) -> list[str]:
    """Problems found when re-checking an export folder without the data (empty: verified)."""
    from .records.verification import verify as verify_folder

    return verify_folder(folder)


def _protect(*args: Any, **kwargs: Any) -> Any:
    """Secondary suppression of an aggregated table without microdata (``sdc_magic.protect.protect``)."""
    from .protect.api import protect as protect_table

    return protect_table(*args, **kwargs)


_ledger.__name__, _export.__name__, _verify.__name__, _protect.__name__ = "ledger", "export", "verify", "protect"
ledger = _PublicFunction(_ledger, "sdc_magic.records.ledger")
export = _PublicFunction(_export, "sdc_magic.records.export")
verify = _PublicFunction(_verify, "sdc_magic.records.verification")
protect = _PublicFunction(_protect, "sdc_magic.protect")
sys.modules[__name__].__class__ = _Package


#: Import paths of the flat layout (before the stage sub-packages) that users and Jupyter
#: configs name: the README's ``session()``, nbconvert's ``RedactPreprocessor``, the server's
#: ``pre_save_hook``, ``python -m sdc_magic.cli`` and the modules behind the public functions.
#: Each old path is the very module object of its new home (monkeypatching either is the same).
MOVED_MODULES = {
    "sdc_magic.extension": "sdc_magic.jupyter.extension",
    "sdc_magic.session": "sdc_magic.jupyter.session",
    "sdc_magic.redact": "sdc_magic.records.redact",
    "sdc_magic.cli": "sdc_magic.jupyter.cli",
    "sdc_magic.server": "sdc_magic.jupyter.server",
    "sdc_magic.ledger": "sdc_magic.records.ledger",
    "sdc_magic.export": "sdc_magic.records.export",
    "sdc_magic.verification": "sdc_magic.records.verification",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old import path and hands out the module at its new home (no file left behind)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # the import system is about to overwrite it
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system has just set ``module.__spec__`` to the alias: give it back its own
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname: str) -> Any:  # ``python -m <old path>`` (runpy asks for the code)
        spec = importlib.util.find_spec(MOVED_MODULES[fullname])
        return spec.loader.get_code(spec.name)  # type: ignore[union-attr]


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def load_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%load_ext sdc_magic``; never leaves tables unprotected.

    If even importing the extension fails, every pandas table is withheld with the reason.
    """
    try:
        from .jupyter.extension import load
    except Exception as exc:
        from .jupyter import failsafe

        failsafe.install(ipython, f"{type(exc).__name__}: {exc}")
        return
    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%unload_ext sdc_magic``: restores pandas and IPython exactly."""
    from .jupyter import failsafe

    failsafe.remove()
    if sys.modules.get("sdc_magic.jupyter.extension") is not None:
        from .jupyter.extension import unload

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
    """Register the ``/sdc-magic/`` routes (``sdc_magic.jupyter.server``, imported only here)."""
    from .jupyter.server import load

    load(server_app)
