"""Evidence capture, one module per engine over one engine-neutral evidence contract.

Every engine module records, for each aggregated result it sees, an
:class:`~sdc_magic.registry.Entry`: per output cell the statistic, the distinct units and
the magnitude facts (totals, largest contributions per unit) that the rules need. The
rest of the pipeline (resolve, rules, protect, render, ledger, export) reads only those
entries and never learns which engine computed a table.

* :mod:`.pandas`: reversible wrappers of pandas' aggregation entry points.
"""

from .pandas import Capture, Source, build_entry, stat_name

__all__ = ["Capture", "Source", "build_entry", "stat_name"]
