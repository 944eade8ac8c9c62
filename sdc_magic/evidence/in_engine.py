"""The rows behind a table left in its engine: what linking needs to count them there.

Linking compares the rows behind the cells of different outputs. For a large source an
engine does not hand those rows to Python (millions of fingerprints); it describes them
instead (:class:`InEngineRows`): which base rows the table is over (its ``identity``: tables
with the same identity are over the same rows), the condition that selects its rows and its
keys, as engine expressions; plus a ``count`` that runs one aggregation on the connection and
returns the number of base rows of every combination of some expressions' values. Linking
(:mod:`sdc_magic.linking.in_engine`) keeps the expressions of every earlier output of the same
rows, so the atoms of the session (the groups of rows its outputs separate together) are
counted in the engine: O(atoms) rows come back, none of the microdata's.

It lives here, below both, so capture never imports linking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd


@dataclass
class InEngineRows:
    """A table's rows, described for counting in the engine (see the module docstring)."""

    engine: str
    identity: str  # the base rows (e.g. the FROM clause): the same identity, the same rows
    condition: str  # per base row, whether it is in the table (never NULL)
    key_expressions: list[str]  # per key, its value on each base row (as the table computes it)
    keys: list[str]  # the keys' names in the table
    columns: frozenset[str]  # the base rows' column names (notes name the columns outputs share)
    #: rows of every combination of the expressions' values: columns g0, g1, … and n
    count: Callable[[list[str]], pd.DataFrame]
    #: the table's own groups as the engine computed them with it (its keys' values, and ``n``
    #: rows each), when it has them: the first table of a base needs no count of its own
    groups: pd.DataFrame | None = None
    total: Callable[[], int] | None = None  # rows of the base (with ``groups``: the rows outside the table)
    #: a 0/1 flag whose sums are the whole table: its rows are those where the flag is 1 (the
    #: condition says so), and each sum is the count of them, checked as a count
    flag: str | None = None
