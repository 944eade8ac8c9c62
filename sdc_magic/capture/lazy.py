"""Run a callback right after a module is imported: engines are wrapped when the user imports them.

Why: wrapping polars, DuckDB and PySpark when the extension loads imported all three, about
a second of ``%load_ext`` for a user who never touches them (issue 24.9). A finder placed
first on ``sys.meta_path`` answers only for the watched top-level packages: it asks the other
finders for the real spec and hands back the same spec with a loader that runs the real
loader, then the callback, before the ``import`` statement returns. Each callback runs at
most once; removing the finder (:meth:`AfterImport.uninstall`) restores the import system.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _Loader(importlib.abc.Loader):
    """The real loader, then the callback (once the package's ``__init__`` has run)."""

    def __init__(self, real: Any, then: Callable[[], None]) -> None:
        self.real = real
        self.then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module's spec names the real loader again: pkgutil, importlib.resources and
        # reloads see the package as if nothing had happened
        if module.__spec__ is not None:
            module.__spec__.loader = self.real
        module.__loader__ = self.real
        self.real.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.real, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``watched[name]()`` once, right after top-level module ``name`` is first imported."""

    def __init__(self, watched: dict[str, Callable[[], None]]) -> None:
        self.watched = dict(watched)
        self._looking = False

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.watched or self._looking:
            return None
        self._looking = True
        try:
            spec = importlib.util.find_spec(fullname)  # the other finders (this one is looking)
        finally:
            self._looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        # (a spec asked for and never executed, as ``importlib.util.find_spec`` probes do, must
        # not use the callback up: it is taken when the module runs)
        def then() -> None:
            callback = self.watched.pop(fullname, None)
            if not self.watched:
                self.uninstall()
            if callback is not None:
                callback()

        spec.loader = _Loader(spec.loader, then)
        return spec
