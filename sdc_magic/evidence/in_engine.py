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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import rows


@dataclass(frozen=True)
class SmallAtoms:
    """What a count of units under a declared unit is cut down to (``linking.engine_units``).

    ``rows``: per position of the count (a combination of the session's expressions), the rows of
    the atom it belongs to. The engine keeps, in each unit's set, only the positions whose atom has
    more than 0 and fewer than ``threshold × most`` rows, ``most`` being the most rows one unit
    has (the rows without a unit are one unit together, as a declared unit counts them), and says
    the units with a value and the most rows one has (``kind`` 3): a set of atoms of ``r`` rows
    holds at least ``r / most`` units, so only sets of such atoms can hold fewer than
    ``threshold``. ``most`` and ``units`` (the most rows of one unit with a value, the units), when
    an earlier count over the same rows told them: the engine does not count rows per unit again.
    """

    rows: np.ndarray
    threshold: int
    most: int | None = None
    units: int | None = None

    def told(self) -> tuple[int, int] | None:
        """(units, the most rows of one) when an earlier count told them, else None."""
        return None if self.most is None or self.units is None else (int(self.units), int(self.most))

    def kept(self, most_with_a_value: int, rows_without: int) -> np.ndarray:
        """The positions kept, given the most rows of one unit with a value and the rows without a
        unit (one unit together): those of atoms of 0 < rows < threshold × most (the engines that
        cut in Python; DuckDB says the same in SQL, ``sql_lineage.lineage_unit_query``)."""
        most = max(int(most_with_a_value), int(rows_without), 1)
        atom_rows = np.asarray(self.rows, dtype=np.int64)
        return np.flatnonzero((atom_rows > 0) & (atom_rows < int(self.threshold) * most))


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
    #: an indicator whose sums are the whole table: its rows are those at the indicator's level
    #: (the condition says so); for a 0/1 flag each sum is the count of them, checked as a count
    flag: str | None = None
    #: the value marking the indicator's attribute (``VarEvidence.level``): 1 for a 0/1 flag; the
    #: sums of another coding (1/2) are no counts, its groups alone are checked
    level: float = 1.0
    #: per indicator whose mean (or sum beside other statistics) the table shows, the rows at its
    #: level (key: the variable) and those at its other value (key: ``("other", variable)``):
    #: two more populations the table publishes (``linking.populations.indicator_variables``);
    #: indicators side by side whose rows never meet, one more: their rows as one population over
    #: (group, indicator) (key ``("combined", indicators)``, its keys the table's and
    #: :data:`VARIANT_KEY`)
    variants: dict[Any, InEngineRows] = field(default_factory=dict)
    #: this is such a population: its groups (``ones``) are checked, not the table's cells
    variant: bool = False
    #: rows of the base when the engine knows them without a query (a polars frame's height)
    base_rows: int | None = None
    #: per variable whose sums or means the table shows, its expression over the base rows as the
    #: table computes it (engine text), and ``count_values(expressions, values)``: ``count`` with,
    #: per value expression, a column c0, c1, … of the sum (mod 2**64) of a 64-bit hash of each
    #: row's value, as uint64 (``linking.engine_values``: values edited between two tables of sums)
    values: dict[str, str] = field(default_factory=dict)
    count_values: Callable[[list[str], list[str]], pd.DataFrame] | None = None
    #: per value expression, the engine text of its zero (None: ``x * 0``, every value a number)
    zero_of: Callable[[str], str] | None = None
    #: per variable whose distinct values the table counts, its expression over the base rows; and
    #: ``count_units(expressions, unit, most_sets)``: per set of combinations of the expressions'
    #: values that one unit's rows fall in, its units (``linking.engine_units``; integer columns:
    #: ``kind`` 0 one row per (set ``s``, position ``r`` in ``count``'s order) with ``n`` its units
    #: and ``most`` the most rows of one, at most ``most_sets + 1`` sets; ``kind`` 1 per position,
    #: ``n`` rows without a unit; ``kind`` 2 per position, ``n`` its rows). An optional fourth
    #: argument, :class:`SmallAtoms`, cuts the sets down to the positions of small atoms, and
    #: ``kind`` 3 then tells the units (``n``) and the most rows one has (``most``); an engine may
    #: ignore it and answer in full
    units: dict[str, str] = field(default_factory=dict)
    count_units: Callable[..., pd.DataFrame] | None = None
    #: :func:`distinct_values` per variable, counted once (a display asks it for the rules and
    #: again for the protection)
    spread: dict[str, tuple[int, int] | None] = field(default_factory=dict, repr=False)
    #: the populations one table publishes (its rows and its variants, :func:`link_family`): linking
    #: counts them all in one aggregation per display (``linking.in_engine.split``)
    family: list[InEngineRows] = field(default_factory=list, repr=False, compare=False)
    #: what the table publishes that is not among its populations (more sets of indicators whose rows
    #: never meet than :data:`MAX_DISJOINT_SETS`): the table is ``review``, saying so
    #: (``linking.populations.indicators_left_out``)
    left_out: list[str] = field(default_factory=list)


def link_family(table: InEngineRows) -> InEngineRows:
    """Tell a table's rows and its variants that they are one table's populations (``family``);
    returns ``table``."""
    members = [table, *table.variants.values()]
    for member in members:
        member.family = members
    return table


#: What a table with too many sets of indicators whose rows never meet leaves uncompared (a note).
SETS_LEFT_OUT = "its indicators' sets whose rows never meet"
#: Indicators of one table whose rows are linked (each is two or three populations, every one
#: drafted and compared at each display): by rows a table with more is ``review``
#: (``linking.populations.indicators_left_out``), and an engine counts no more side by side
#: (``capture.contract.flagged_variables``: such a table is read by rows).
MAX_INDICATORS = 12
#: The key an engine's population of disjoint indicators side by side adds to the table's keys
#: (``InEngineRows.variants[("combined", indicators)]``): per row, the position of the indicator
#: at its level (0, 1, …), as linking by rows numbers them (``linking.populations``).
VARIANT_KEY = "__sdc_variant"


#: Sets of indicators side by side whose flagged rows never meet, each one more population
#: (``variants[("combined", …)]``, :func:`disjoint_sets`): a table with more is ``review``, its sets
#: not compared (``InEngineRows.left_out``; by rows ``linking.populations.indicators_left_out``).
MAX_DISJOINT_SETS = 4


def indicator_overlaps(variants: dict[Any, InEngineRows], flags: list[Any]) -> np.ndarray | None:
    """Per pair of a table's indicators ``flags`` (their populations in ``variants``), whether some
    row is at both their levels, counted in the engine: one aggregation over the base, a row per
    combination of the indicators' conditions back. None when the engine cannot tell.

    Why: side by side, indicators whose flagged rows never meet add up (the shares of districts A
    and B beside the count, or A under 50, A over 50 and B: n − a1 − a2 − b gives C's people):
    each set of such indicators is one more population over (group, indicator)
    (:func:`disjoint_sets`), as linking by rows counts them (``linking.populations``)."""
    try:
        populations = [variants[f] for f in flags]
        counted = populations[0].count([p.condition for p in populations])
    except Exception:
        return None
    if "n" not in counted.columns or any(f"g{j}" not in counted.columns for j in range(len(populations))):
        return None
    rows = pd.to_numeric(counted["n"], errors="coerce").fillna(0).to_numpy() > 0
    at = np.array([[bool(v) for v in counted[f"g{j}"].tolist()] for j in range(len(populations))], dtype=bool)
    at = at[:, rows].astype(np.int64)
    return (at @ at.T) > 0


def disjoint_sets(overlaps: np.ndarray) -> list[tuple[int, ...]] | None:
    """The largest sets (two or more) of indicators no two of which overlap (``overlaps``: per pair,
    whether a row is at both levels), in index order; None when there are more than
    :data:`MAX_DISJOINT_SETS` (maximal cliques of the "never meet" graph, Bron–Kerbosch with a pivot).

    Why every such set and not one: a flag beside A under 50, A over 50 and B overlaps them, and
    one set of every indicator was no partition, so none was counted, by rows or in an engine:
    37 − 8 − 12 − 15 = C's 2 women at ``pass`` (red team of stop 63)."""
    k = len(overlaps)
    apart = [{j for j in range(k) if j != i and not overlaps[i, j]} for i in range(k)]
    found: list[tuple[int, ...]] = []

    def grow(clique: set[int], candidates: set[int], excluded: set[int]) -> None:
        if not candidates and not excluded:
            if len(clique) >= 2:
                found.append(tuple(sorted(clique)))
            return
        pivot = max(candidates | excluded, key=lambda v: (len(apart[v] & candidates), -v))
        for v in sorted(candidates - apart[pivot]):
            grow(clique | {v}, candidates & apart[v], excluded & apart[v])
            candidates = candidates - {v}
            excluded = excluded | {v}

    grow(set(), set(range(k)), set())
    found.sort()
    return None if len(found) > MAX_DISJOINT_SETS else found


def indicator_sets(table: InEngineRows, flags: list[Any]) -> list[list[Any]]:
    """The sets of ``flags`` (indicators side by side, their populations in ``table.variants``) each
    engine counts as one more population over (group, indicator): those whose rows never meet
    (:func:`indicator_overlaps`, :func:`disjoint_sets`). When there are too many, or the engine
    cannot tell, none: the table stays counted in the engine and ``review`` (``table.left_out``).
    One step for DuckDB, polars and Spark; each writes the population its own way."""
    if len(flags) < 2:
        return []
    overlaps = indicator_overlaps(table.variants, flags)
    sets = None if overlaps is None else disjoint_sets(overlaps)
    if sets is None:
        table.left_out.append(SETS_LEFT_OUT)
        return []
    return [[flags[i] for i in members] for members in sets]


def distinct_values(rows: InEngineRows, variable: str) -> tuple[int, int, int, int] | None:
    """(distinct known values of ``variable`` among the table's rows, its known rows there; the
    same over every row of the base), counted in the engine (two aggregations, a few rows back),
    or None when the engine cannot tell.

    What ``checking.check`` asks of a distinct count's source to tell categories (``count(DISTINCT
    district)``: 1 to 5 whatever the group) from units (``count(DISTINCT person)``); with the rows
    in Python it reads them, with the rows left in the engine it asks this (red team of stop 58:
    such tables were blocked above ``IN_ENGINE_ROWS``, ``pass`` below). The base's spread too:
    three people of 30 visits each are all of district C's people, and among C's rows alone they
    look like a category (red team of stop 58, R2b)."""
    if variable not in rows.spread:
        rows.spread[variable] = _counted_values(rows, variable)
    return rows.spread[variable]


def _counted_values(rows: InEngineRows, variable: str) -> tuple[int, int, int, int] | None:
    expression = rows.units.get(variable)
    if expression is None or rows.count_units is None:
        return None
    try:
        combos = rows.count([rows.condition])
        found = rows.count_units([rows.condition], expression, 2)
    except Exception:
        return None
    inside = {r for r, value in enumerate(combos["g0"].tolist()) if bool(value)}
    kind, s, r, n = (found[c].to_numpy() for c in ("kind", "s", "r", "n"))
    sets = {int(s[i]): int(n[i]) for i in range(len(kind)) if kind[i] == 0}
    sets_in = {int(s[i]): int(n[i]) for i in range(len(kind)) if kind[i] == 0 and int(r[i]) in inside}
    rows_of = pd.to_numeric(combos["n"]).to_numpy()
    counted = {int(r[i]): int(n[i]) for i in range(len(kind)) if kind[i] == 2}
    missing = {int(r[i]): int(n[i]) for i in range(len(kind)) if kind[i] == 1}
    if any(counted.get(i, 0) != int(rows_of[i]) for i in range(len(rows_of))):
        return None  # (the base changed between the two counts)
    rows_in = sum(counted.get(i, 0) - missing.get(i, 0) for i in inside)
    rows_all = sum(counted.values()) - sum(missing.values())
    return sum(sets_in.values()), rows_in, sum(sets.values()), rows_all


class CountedBases:
    """The bases (``InEngineRows.identity``) whose tables an engine's capture counted in the
    engine, so that later, smaller tables of the same rows are counted there too.

    Why: an engine counts a table in place only above ``rows.IN_ENGINE_ROWS`` rows (below, its
    rows' values let linking compare it with pandas tables of the same people). A session that
    shows a count of 2M people and then a count of one small district would otherwise have the
    two identified in different ways (counted, and read as values): they cannot be matched and
    the second is ``review``. Once a base is counted in the engine, every table over it that the
    engine can count is counted there (one identity, one set of atoms); so is every table over a
    base the engine knows to be large without a query (``InEngineRows.base_rows``: a polars
    frame), whatever the order; and, where counting a base's rows is cheap (``count_bases``:
    DuckDB, whose ``count(*)`` of a table reads its metadata), every table over a base of more
    than ``IN_ENGINE_ROWS`` rows, its size counted once per session. Otherwise (a small Spark
    table first: a count of its base is a job) it is read by rows: the later large table is then
    ``review`` beside it when they share a column (docs/known-gaps.md).

    Why DuckDB counts its bases: a district's count first (read by its rows), then everyone's
    (counted in the engine) made the second ``review`` ("identified in different ways"), the
    commonest order of a session.
    """

    def __init__(self, count_bases: bool = False) -> None:
        self._identities: set[str] = set()
        self.count_bases = count_bases
        self._base_sizes: dict[str, int | None] = {}

    def worth_trying(self, large: bool, sizes_known: bool = False) -> bool:
        """Whether a table should be tried in the engine: a large one, any once a base is, or
        any when the engine tells its bases' sizes for free (``sizes_known``, ``count_bases``)."""
        return large or sizes_known or self.count_bases or bool(self._identities)

    def keep(self, found: InEngineRows | None, large: bool) -> InEngineRows | None:
        """``found`` when the table is large or over a large base (its base is remembered) or over
        a base counted in the engine before; else None (its rows are read)."""
        if found is None:
            return None
        if large or found.identity in self._identities or self._large_base(found):
            self._identities.add(found.identity)
            return found
        return None

    def _large_base(self, found: InEngineRows) -> bool:
        """Whether ``found``'s base holds more than ``IN_ENGINE_ROWS`` rows, as far as known cheaply."""
        size = found.base_rows
        if size is None and self.count_bases and found.total is not None:
            if found.identity not in self._base_sizes:
                try:
                    self._base_sizes[found.identity] = int(found.total())
                except Exception:  # (a base that cannot be counted: its tables are read by rows)
                    self._base_sizes[found.identity] = None
            size = self._base_sizes[found.identity]
        return size is not None and size > rows.IN_ENGINE_ROWS
