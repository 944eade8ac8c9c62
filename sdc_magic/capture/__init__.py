"""Evidence capture, one module per engine over one engine-neutral evidence contract.

Every engine module records, for each aggregated result it sees, an
:class:`~sdc_magic.evidence.registry.Entry`: per output cell the statistic, the distinct units and
the magnitude facts (totals, largest contributions per unit) that the rules need. The
rest of the pipeline (resolve, rules, protect, render, ledger, export) reads only those
entries and never learns which engine computed a table.

* :mod:`.pandas`: reversible wrappers of pandas' aggregation entry points.
* :mod:`.contract`: the facts table other engines compute inside the engine → an Entry.
* :mod:`.polars`, :mod:`.duckdb`, :mod:`.spark`: wrappers of polars, DuckDB and PySpark (facts
  computed by the engine).
* :mod:`.display`: engine objects at display time (intercepted types, pandas form).

:class:`Capture` installs the pandas wrappers and, for each optional engine that is
installed, that engine's wrappers: at once when the engine is already imported, else when the
user imports it (:mod:`.lazy`); a missing engine is skipped.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from .entries import Source, build_entry
from .lazy import AfterImport
from .pandas import Capture as PandasCapture
from .pandas import stat_name

ENGINES = {"polars": ("polars", "PolarsCapture"), "duckdb": ("duckdb", "DuckDBCapture"),
           "spark": ("pyspark", "SparkCapture")}


def _engine_available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class Capture(PandasCapture):
    """pandas capture plus the capture of every installed optional engine.

    An engine is wrapped when it is imported, not when the extension loads (issue 24.9:
    importing polars and PySpark for a pandas user cost ~1 s of ``%load_ext``): an engine
    already imported is wrapped at once; for the others a post-import hook
    (:class:`.lazy.AfterImport`) wraps it right after its package has run, before the
    user's ``import`` statement returns, so no object of it is made unwrapped.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engines: dict[str, Any] = {}
        self._hook: AfterImport | None = None

    def install(self) -> None:
        if self.installed:
            return
        super().install()
        waiting: dict[str, Any] = {}
        for name, (module, _cls) in ENGINES.items():
            if name in self.engines or not _engine_available(module):
                continue
            if module in sys.modules:
                self._install_engine(name)
            else:
                waiting[module] = lambda name=name: self._install_engine(name)
        if waiting:
            self._hook = AfterImport(waiting)
            self._hook.install()

    def _install_engine(self, name: str) -> None:
        if not self.installed or name in self.engines:
            return
        cls = ENGINES[name][1]
        try:
            mod = importlib.import_module(f".{name}", __name__)
            engine = getattr(mod, cls)(self.registry, self.rules)
            engine.install()
            self.engines[name] = engine
        except Exception as exc:  # an engine we cannot wrap: its tables are shown without evidence
            self.registry.failures.append(f"{name} capture not installed: {type(exc).__name__}: {exc}")

    def uninstall(self) -> None:
        if self._hook is not None:
            self._hook.uninstall()
            self._hook = None
        for engine in reversed(list(self.engines.values())):
            engine.uninstall()
        self.engines.clear()
        super().uninstall()


__all__ = ["Capture", "PandasCapture", "Source", "build_entry", "stat_name"]
