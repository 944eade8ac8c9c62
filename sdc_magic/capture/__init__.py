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
installed, that engine's wrappers (the engine is imported then; a missing engine is skipped).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from .entries import Source, build_entry
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
    """pandas capture plus the capture of every installed optional engine."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engines: dict[str, Any] = {}

    def install(self) -> None:
        if self.installed:
            return
        super().install()
        for name, (module, cls) in ENGINES.items():
            if name in self.engines or not _engine_available(module):
                continue
            try:
                mod = importlib.import_module(f".{name}", __name__)
                engine = getattr(mod, cls)(self.registry, self.rules)
                engine.install()
                self.engines[name] = engine
            except Exception as exc:  # an engine we cannot wrap: its tables are shown without evidence
                self.registry.failures.append(f"{name} capture not installed: {type(exc).__name__}: {exc}")

    def uninstall(self) -> None:
        for engine in reversed(list(self.engines.values())):
            engine.uninstall()
        self.engines.clear()
        super().uninstall()


__all__ = ["Capture", "PandasCapture", "Source", "build_entry", "stat_name"]
