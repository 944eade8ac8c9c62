"""The engine-neutral evidence contract: per-group facts computed by an engine → an Entry.

Engines other than pandas (polars, DuckDB, ...) compute the facts the rules need *inside
the engine*, as one small table with one row per output group, and only that table comes
back to Python:

=====================  ===============================================================
column                 meaning
=====================  ===============================================================
the key columns        the group's labels, named as in the displayed result
``__sdc_rows``         rows in the group
``__sdc_units``        distinct units in the group (= rows without a unit column)
``__sdc_n_<i>``        units with a value of variable *i*
``__sdc_t_<i>``        total of variable *i* (after summing per unit)
``__sdc_ta_<i>``       total of absolute values (after summing per unit)
``__sdc_neg_<i>``      whether some unit contributes a negative value
``__sdc_top_<i>``      the k largest absolute contributions per unit, a list
=====================  ===============================================================

:func:`register` turns that table into a :class:`~sdc_magic.evidence.facts.GroupEvidence` and
records an :class:`~sdc_magic.evidence.registry.Entry` for the engine's result converted to pandas
(keys as index), exactly as :mod:`.pandas` does for pandas' own results. The engine object
is remembered (weakly) with that pandas form, so displaying it later finds the evidence
by identity; anything derived from it (sorted, filtered, ``to_pandas()``) is matched by
labels and values like a reshaped pandas result.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..evidence import rows as row_limits
from ..evidence.facts import GroupEvidence, VarEvidence
from ..evidence.flatten import canonical_labels, flatten
from ..evidence.in_engine import MAX_INDICATORS, VARIANT_KEY
from ..evidence.registry import Registry
from ..evidence.weak_table import WeakTable
from .entries import Source, build_entry

PREFIX = "__sdc_"
#: the statistics an engine expression may compute, by the engine's own names
ENGINE_STATS = {
    "len": "size", "count_star": "size", "size": "size", "count": "count", "sum": "sum", "mean": "mean",
    "avg": "mean", "median": "median", "min": "min", "max": "max", "std": "std", "stddev": "std",
    "stddev_samp": "std", "var": "var", "variance": "var", "var_samp": "var", "n_unique": "nunique",
    "nunique": "nunique", "first": "first", "last": "last", "mode": "mode", "any_value": "first",
    "arbitrary": "first",
}


def fact_names(i: int) -> dict[str, str]:
    """Column names of the facts of the ``i``-th variable."""
    return {f: f"{PREFIX}{f}_{i}" for f in ("n", "t", "ta", "neg", "top")}


#: the fact of a variable's values' checksum per group (``sum(hash(x))`` mod 2**64, the i-th
#: variable's), where an engine computes it with the table (DuckDB): see :func:`counted_groups`
VALUE_CHECKSUM = f"{PREFIX}hs_"


def checksum_sql(expression: str, known_only: bool = False) -> str:
    """DuckDB's sum (mod 2**64, as UBIGINT) of a 64-bit hash of each row's value of ``expression``
    (``linking.engine_values``: sums, not XORs, so that two equal values do not cancel out).
    ``known_only``: of the rows where it is not missing (a table's facts: see :func:`counted_groups`)."""
    summed = f"sum(hash({expression})::HUGEINT)"
    if known_only:
        summed = f"coalesce({summed} FILTER (WHERE ({expression}) IS NOT NULL), 0)"
    return wrapped(summed)


def wrapped(summed: str) -> str:
    """A sum of 64-bit hashes taken mod 2**64, as UBIGINT (how every checksum is told)."""
    return f"({summed} % 18446744073709551616)::UBIGINT"


def counted_groups(facts: pd.DataFrame | None, keys: list[str], known: bool,
                   ones: np.ndarray | None = None, checksums: list[int] | None = None) -> pd.DataFrame | None:
    """A table's groups and their rows (``known``: of its one variable's known values; ``ones``:
    per group, the rows where its 0/1 flag is 1), from the facts computed with it: what linking
    inside an engine checks its own count against."""
    counted = fact_names(0)["n"] if known else f"{PREFIX}rows"
    if facts is None or (not keys and ones is None) or counted not in facts.columns \
            or not all(k in facts.columns for k in keys) \
            or "n" in keys:  # (a key named n: linking's count column; counted instead)
        return None
    groups = facts[list(keys)].reset_index(drop=True)
    if ones is not None:
        if len(ones) != len(facts):
            return None
        groups["n"] = np.asarray(ones, dtype=np.int64)
    else:
        groups["n"] = pd.to_numeric(facts[counted], errors="coerce").fillna(0).to_numpy(np.int64)
    # (``checksums``: the facts' indices of variables whose values' checksums come along, as c0, c1, …;
    # the facts sum the hashes of known values only, the engine's count those of the rows it counts:
    # the same numbers when the table counts known values only, or no value is missing; else the
    # engine counts them itself: a mismatch called the next table of sums an edit, over-protection)
    for j, i in enumerate(checksums or []):
        name, known_values = f"{VALUE_CHECKSUM}{i}", fact_names(i)["n"]
        if name not in facts.columns or not (known or _none_missing(facts, known_values)):
            break
        groups[f"c{j}"] = facts[name].to_numpy().astype(np.uint64)
    return groups[groups["n"] > 0].reset_index(drop=True)


def _none_missing(facts: pd.DataFrame, known_values: str) -> bool:
    """Every row of every group has a value (the facts' count of known values is its rows)."""
    if known_values not in facts.columns or f"{PREFIX}rows" not in facts.columns:
        return False
    known = pd.to_numeric(facts[known_values], errors="coerce").to_numpy(dtype=float)
    rows = pd.to_numeric(facts[f"{PREFIX}rows"], errors="coerce").to_numpy(dtype=float)
    return bool(np.array_equal(known, rows))


def summed_flag(ge: Any, stats: set[str], variables: list[str]) -> str | None:
    """The indicator whose sums are the whole table, or None.

    Such a table publishes, per group, the count of the rows where the flag is 1: linking inside
    an engine counts those rows (its condition ``flag = 1``), as linking by rows does
    (``linking/populations._restrict_to_variable``). An indicator is a variable the facts call one
    (every value at its group's minimum or maximum: ``VarEvidence.ones``, at ``VarEvidence.level``).
    Linking checks that each group has the rows the facts counted at that level
    (``in_engine.groups_agree``) and, for a 0/1 flag, that each sum is that count
    (``in_engine.counts_agree``). Only when the indicator's other value is 0 (``low``): the
    sums of a 1/2 coding are n + n₂, the table's known rows and its flagged rows, two
    populations (the flagged ones a variant, :func:`flagged_variables`; red team: its sums
    outside C, then the flag's, gave C's one man back)."""
    if stats != {"sum"} or len(variables) != 1:
        return None
    (var,) = variables
    found = getattr(ge, "variables", {}).get(var)
    if flag_level(ge, var) is None or getattr(found, "low", None) != 0.0:
        return None  # (a 1/2 coding's sums add every known row in: two populations, see flagged_variables)
    return var


def other_ones(ge: Any, var: Any) -> tuple[float, np.ndarray] | None:
    """(an indicator's other value, per group its known rows at that value), or None.

    A table that shows an indicator's mean (or its sums beside counts) publishes its known rows
    and the flagged ones, hence the rest too: linking counts them as one more population
    (``("other", var)`` in ``InEngineRows.variants``, as ``linking.populations.indicator_variables``
    by rows)."""
    found = getattr(ge, "variables", {}).get(var)
    low = getattr(found, "low", None)
    if found is None or found.ones is None or low is None or not np.isfinite(low) \
            or len(found.units) != len(found.ones):
        return None
    return float(low), np.maximum(np.asarray(found.units, dtype=np.int64) - np.asarray(found.ones, dtype=np.int64), 0)


def variant_populations(ge: Any, flagged: list[str]) -> list[tuple[Any, str, float, np.ndarray]]:
    """The populations indicators' means (or their sums beside others) publish besides the table's
    rows, as (key in ``InEngineRows.variants``, the indicator, the value its rows have, per group
    its rows): for each indicator the rows at its level, and those at its other value. One list
    for every engine, so each counts the same populations as
    ``linking.populations.indicator_variables`` by rows. ``flagged``: as :func:`flagged_variables`
    names them (each has both)."""
    out: list[tuple[Any, str, float, np.ndarray]] = []
    for flag in flagged:
        low, others = other_ones(ge, flag)  # type: ignore[misc]  # (checked by flagged_variables)
        out += [(flag, flag, level_of(ge, flag), ge.variables[flag].ones), (("other", flag), flag, low, others)]
    return out


def combined_groups(ge: Any, facts: pd.DataFrame | None, keys: list[str], flagged: list[str]
                    ) -> pd.DataFrame | None:
    """Disjoint indicators side by side as one population's groups (``InEngineRows.variants[
    ("combined", indicators)]``): per group of the table and indicator (``VARIANT_KEY``: its
    position in ``flagged``) the rows at its level, from the facts computed with the table; what
    linking checks the engine's count of that population against. None without them."""
    parts = []
    for j, flag in enumerate(flagged):
        found = counted_groups(facts, keys, False, ge.variables[flag].ones)
        if found is None:
            return None
        parts.append(found[[*keys, "n"]].assign(**{VARIANT_KEY: j}))
    out = pd.concat(parts, ignore_index=True)[[*keys, VARIANT_KEY, "n"]]
    return out[out["n"] > 0].reset_index(drop=True)


def level_of(ge: Any, var: Any) -> float:
    """:func:`flag_level` of an indicator known to have one (1 otherwise; a level of 0, a 0/−1
    coding's, is kept: ``flag_level(...) or 1.0`` counted such a table at 1, red team)."""
    level = flag_level(ge, var)
    return 1.0 if level is None else level


def flag_level(ge: Any, var: Any) -> float | None:
    """The value marking the attribute of an indicator (1 for a 0/1 flag, the higher value of a
    two-valued coding, as the facts found it), or None when ``var`` is none: the rows linking
    inside an engine counts for it are those at this value."""
    found = getattr(ge, "variables", {}).get(var)
    if found is None or getattr(found, "ones", None) is None:
        return None
    level = getattr(found, "level", None)
    return float(level) if level is not None and np.isfinite(level) else None


def flagged_variables(ge: Any, measures: list[tuple[str | None, str]]) -> tuple[bool, list[str]]:
    """(whether a table can be counted in an engine as far as its indicators go, the indicators whose
    flagged rows it publishes besides its own, in the order of its measures).

    A mean of an indicator (or its sum beside other statistics) publishes the rows where it is 1
    (``linking.populations.indicator_variables``): an engine counts them as one more population,
    and the rows at the indicator's other value as another (``InEngineRows.variants``). Means and
    sums only, of at most :data:`~sdc_magic.evidence.in_engine.MAX_INDICATORS` indicators (as by
    rows); an indicator's other statistics are read by rows, as are variables the evidence does not
    know. Side by side, each largest set of them whose rows never meet is one more population over
    (group, indicator), as by rows (:func:`~sdc_magic.evidence.in_engine.indicator_overlaps` and
    :func:`~sdc_magic.evidence.in_engine.disjoint_sets`, each engine's capture)."""
    found = getattr(ge, "variables", {})
    flags: list[str] = []
    for v, _ in measures:
        if v is None:
            continue
        if v not in found:
            return False, []
        if getattr(found[v], "ones", None) is not None:
            if flag_level(ge, v) is None or other_ones(ge, v) is None:
                return False, []
            if v not in flags:
                flags.append(v)
    if len(flags) > MAX_INDICATORS or {st for v, st in measures if v in flags} - {"mean", "sum"}:
        return False, []
    return True, flags


def group_evidence_from_facts(facts: pd.DataFrame, keys: list[str], variables: list[Any], k: int,
                              unit: str | None) -> GroupEvidence:
    """A GroupEvidence from an engine's facts table (see the module docstring)."""
    n = len(facts)
    if keys:
        arrays = [canonical_labels(facts[key].to_numpy(dtype=object)) for key in keys]
        index = pd.MultiIndex.from_arrays(arrays, names=keys) if len(keys) > 1 else \
            pd.Index(arrays[0], dtype=object, name=keys[0])
    else:
        index = pd.Index(["__all__"], dtype=object)
    rows = _ints(facts, f"{PREFIX}rows", n)
    units = _ints(facts, f"{PREFIX}units", n) if f"{PREFIX}units" in facts.columns else rows.copy()
    out: dict[Any, VarEvidence] = {}
    for i, var in enumerate(variables):
        names = fact_names(i)
        var_units = _ints(facts, names["n"], n) if names["n"] in facts.columns else units.copy()
        total = _floats(facts, names["t"], n)
        total_abs = _floats(facts, names["ta"], n)
        negative = facts[names["neg"]].fillna(False).to_numpy(dtype=bool) if names["neg"] in facts.columns \
            else np.zeros(n, dtype=bool)
        top = np.full((n, k), np.nan)
        if names["top"] in facts.columns:
            for r, values in enumerate(facts[names["top"]].to_numpy(dtype=object)):
                if values is None or isinstance(values, str) or not hasattr(values, "__iter__"):
                    continue  # no value in the group (None, NaN, pd.NA)
                vals = sorted([abs(float(v)) for v in values if v is not None and v is not pd.NA and v == v],
                              reverse=True)[:k]
                if vals:
                    top[r, :len(vals)] = vals
        # optional: units meeting a condition, when the variable is its 0/1 indicator
        ones = _ints(facts, f"{PREFIX}ones_{i}", n) if f"{PREFIX}ones_{i}" in facts.columns else None
        out[var] = VarEvidence(units=var_units, total=total, total_abs=total_abs, negative=negative, top=top,
                               ones=ones, level=1.0 if ones is not None else None,
                               low=0.0 if ones is not None else None)
    return GroupEvidence(index=index, units=units, variables=out, unit_column=unit, rows=rows)


def _ints(facts: pd.DataFrame, name: str, n: int) -> np.ndarray:
    if name not in facts.columns:
        return np.zeros(n, dtype=np.int64)
    return pd.to_numeric(facts[name], errors="coerce").fillna(0).to_numpy(dtype=np.int64)


def _floats(facts: pd.DataFrame, name: str, n: int) -> np.ndarray:
    if name not in facts.columns:
        return np.full(n, np.nan)
    return pd.to_numeric(facts[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def keyed(result: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """An engine result converted to pandas, with its key columns as the index."""
    present = [k for k in keys if k in result.columns]
    return result.set_index(present) if present else result


def register(registry: Registry, rules: Any, call: str, shown: pd.DataFrame, ge: GroupEvidence,
             keys: list[str], measure_of: Callable[[str], tuple[Any, str]], notes: list[str],
             engine_object: Any = None, margin_label: str | None = None,
             rows: pd.DataFrame | None = None) -> Any:
    """Record the evidence of one engine aggregation; ``shown`` is its pandas form (keys as index).

    ``rows`` (optional) lets the table take part in linking (:mod:`sdc_magic.linking`)
    without the microdata leaving the engine: one row per source row that reached the
    aggregation, holding the grouping keys (as shown) and, per other source column, a
    64-bit hash computed by the engine, in columns named ``"<engine>#<column>"`` (so
    that rows of one engine are matched by content across its tables; they are never
    mixed with pandas' own fingerprints).  It is used for linking only, never for
    suggestions.
    """
    flat = flatten(shown)
    entry = build_entry(registry.new_id(), call, flat, ge, keys, measure_of, notes, rules.top_k, margin_label)
    entry.unit = rules.unit if ge.unit_column else None
    if rows is not None:
        entry.source = Source(None, list(keys), call, rows=rows)
    registry.add(entry, shown)
    if engine_object is not None:
        remember(engine_object, shown)
    return entry


# --------------------------------------------------------------------- engine objects
_lock = threading.RLock()  # weakref callbacks may run while it is held
_forms: dict[int, tuple[Any, pd.DataFrame | pd.Series]] = {}
MAX_FORMS = 512


def remember(engine_object: Any, shown: pd.DataFrame | pd.Series) -> None:
    """Keep the pandas form of an engine result while the engine object lives."""
    key = id(engine_object)
    try:
        ref: Any = weakref.ref(engine_object, lambda _r: _forget(key))
    except TypeError:
        return
    with _lock:
        _forms[key] = (ref, shown)
        while len(_forms) > MAX_FORMS:
            _forms.pop(next(iter(_forms)))


def _forget(key: int) -> None:
    try:
        with _lock:
            _forms.pop(key, None)
    except Exception:  # interpreter shutdown
        pass


def changed_in_place(engine_object: Any) -> None:
    """An engine result with a remembered form was changed in place (polars ``replace_column``,
    ``df[i, c] = v``, ``extend``...): the form no longer shows what it holds, so it is dropped and
    the result is checked as an aggregate without evidence (every number but whole counts
    withheld), as other aggregates changed in place are (red team: a polars SQL result edited in
    place was displayed as the figures it held before)."""
    with _lock:
        hit = _forms.get(id(engine_object))
        if hit is None or hit[0]() is not engine_object:
            return
        _forms.pop(id(engine_object), None)
    mark_untraced(engine_object, None)


def form_of(engine_object: Any) -> pd.DataFrame | pd.Series | None:
    """The registered pandas form of an engine result, or None."""
    with _lock:
        hit = _forms.get(id(engine_object))
    if hit is None or hit[0]() is not engine_object:
        return None
    return hit[1]


def clear() -> None:
    with _lock:
        _forms.clear()


# --------------------------------------------------------------------- marks on engine results
#: the marks of a live object (by identity, held weakly: evidence/weak_table.py)


def weak_marks() -> WeakTable:
    """A table of marks: a value per live object, the newest :data:`MAX_FORMS`."""
    return WeakTable(MAX_FORMS)


_aggregates = weak_marks()
_withheld = weak_marks()
_row_windows = weak_marks()
_value_selected = weak_marks()
_selection_read = weak_marks()


def mark_selection_read(obj: Any) -> None:
    """Note that the condition that chose ``obj``'s rows was read and pins no figure (a SQL WHERE,
    a polars filter): ``checking.selection.withhold_if_selected_unexplained`` leaves it alone."""
    _selection_read.set(obj, True)


def selection_read(obj: Any) -> bool:
    return bool(_selection_read.get(obj))


def mark_selected_by_values(obj: Any, reason: str) -> None:
    """Note that the groups ``obj`` shows were kept by a condition on their figures bounding them
    from both sides (``HAVING count(*) = 2``, ``filter(pl.col("len") == 2)``). If the check hides
    any of its cells, nothing of it may be drawn: its labels say what the hidden figures are."""
    _value_selected.set(obj, reason)


def selected_by_values(obj: Any) -> str | None:
    return _value_selected.get(obj)


_one_sided = weak_marks()


def mark_one_sided(obj: Any, bounds: list[tuple[str, str, float]]) -> None:
    """Note the one-sided conditions on figures every group ``obj`` shows meets (``(column, op,
    number)``, a polars ``filter(pl.col("len") < 10)`` of an aggregate): the check remembers which
    side of its hidden figures they tell (``checking/revealed.py``)."""
    if bounds:
        _one_sided.set(obj, list(bounds))


def one_sided(obj: Any) -> list[tuple[str, str, float]] | None:
    return _one_sided.get(obj)


#: (more than the other marks: every derivation of a captured table is marked, and a mark lost to
#: the limit makes its display a table found by labels only; red team, stop 56: 520 live copies)
_origins = WeakTable(16 * MAX_FORMS)


def mark_origin(obj: Any, entry_id: int | None) -> None:
    """Note that ``obj`` was computed from the captured table of entry ``entry_id`` alone (sorted,
    rounded, some of its rows or columns, converted to pandas): the display checks it as that
    table when its figures are that table's (or a display of them), before any other table with
    the same labels and figures. Why (red team, stop 55): districts A and B had equal sums by
    sex; A's table, sorted after B's was computed, was taken for B's, and A without one person
    was then compared with B's rows, both cleared."""
    if entry_id is not None:
        _origins.set(obj, entry_id)


def origin_of(obj: Any) -> int | None:
    """The entry ``obj`` was computed from alone (see :func:`mark_origin`), or None."""
    return _origins.get(obj)


def entry_id_of(obj: Any, registry: Registry) -> int | None:
    """The entry ``obj`` is (the captured object, or an engine result's pandas form), or was
    computed from alone (:func:`mark_origin`); None when neither."""
    for candidate in (obj, form_of(obj)):
        if candidate is not None:
            entry = registry.by_object(candidate)
            if entry is not None:
                return entry.id
    return origin_of(obj)


def carry_origin(inputs: list[Any], result: Any, registry: Registry) -> None:
    """Mark ``result`` with the entry of the one captured table among ``inputs`` (see
    :func:`mark_origin`); nothing when none or several are (a join of two tables is neither)."""
    found = {e for e in (entry_id_of(i, registry) for i in inputs) if e is not None}
    if len(found) == 1 and result is not None:
        mark_origin(result, found.pop())


def mark_aggregate(frame: pd.DataFrame) -> None:
    """Note that ``frame`` is the result of an aggregation we could not capture.

    Its text columns are then labels, not row-level data: the display checks its numbers as
    unverified (whole numbers as counts) instead of showing a table of small counts as
    microdata (issue 14: a DuckDB query we cannot plan, fetched with ``.df()``).
    """
    _aggregates.set(frame, True)


def is_aggregate(obj: Any) -> bool:
    return bool(_aggregates.get(obj))


#: the mark of an aggregate whose numbers the capture cannot trace to its groups
UNTRACED = "untraced"


def mark_untraced(obj: Any, columns: tuple[str, ...] | None = None) -> None:
    """Note that ``obj`` (a pandas frame, or an engine's result) was computed from aggregates in
    a way no plan models: a window over groups, a running total, a ratio of aggregates, a join
    of aggregates, a column added to an aggregated frame.

    Why (issue 23.3): such a result was "row-level" and drawn as it is (C's 3 beside its
    percent of the total). Marked, it is checked as an unverified aggregate and, beyond that,
    every number that is not a whole count is withheld on screen, as is every cell of
    ``columns`` (those computed from the aggregates rather than aggregates themselves: a
    cumulative count of 70, 72, 73 gives 2 and 1 back however large each figure is). ``None``:
    which columns are counts is not known (a UNION of aggregates, ``SELECT *`` over one): every
    number is withheld, the labels stay (a maximum of 102 is not a count).
    """
    _aggregates.set(obj, (UNTRACED, tuple(columns) if columns is not None else None))


def mark_row_windows(obj: Any, columns: tuple[str, ...]) -> None:
    """Note that ``obj`` is row-level data with ``columns`` computed over groups of rows.

    ``count(*) OVER (PARTITION BY district)``, ``pl.len().over("district")``,
    ``mean().over(...)``: each row carries its group's count or mean, a small count and a
    mean of three people among them. The rows stay row-level data (shown, never exportable);
    those columns are withheld.
    """
    _row_windows.set(obj, tuple(columns))


def row_window_columns(obj: Any) -> tuple[str, ...] | None:
    """The withheld window columns of row-level data (see :func:`mark_row_windows`), or None."""
    return _row_windows.get(obj)


def untraced_columns(obj: Any) -> tuple[str, ...] | None:
    """The columns withheld in an untraced aggregate (``("*",)``: all), None if not untraced."""
    mark = _aggregates.get(obj)
    if isinstance(mark, tuple) and mark[:1] == (UNTRACED,):
        return mark[1] if mark[1] is not None else (EVERY_COLUMN,)
    return None


#: in :func:`untraced_columns`: every column is computed (none is known to be a count)
EVERY_COLUMN = "*"


class Withheld(Exception):
    """An engine result that must not be shown at all (the reason says why and what to do)."""

    sdc_note = True  # the display shows the reason in its blocked placeholder


def mark_withheld(obj: Any, reason: str) -> None:
    """Withhold the display of ``obj`` (e.g. the pandas frame fetched from a withheld query)."""
    _withheld.set(obj, reason)


def withheld_reason(obj: Any) -> str | None:
    return _withheld.get(obj)


# --------------------------------------------------------------------- recipes of derived tables
class Recipe:
    """How a table was computed from aggregation results: the pandas call and its inputs.

    Why (issue 23.4): a table derived from a checked aggregate (``cumsum``, ``shift``,
    ratios of shifted copies, ``diff``, ``pct_change``, ``rank``, arithmetic between
    aggregates, ``concat``) has no evidence of its own, and its cells at labels the parent
    publishes can give a hidden cell back (``73 - 70 = 3`` from a cumulative count,
    ``135 × 0.0148 = 2`` from a month-on-month ratio).  With the recipe, the check computes
    the table again from its parents with their hidden cells replaced, and hides every cell
    that moves (:mod:`sdc_magic.checking.lineage`): the derived table is then as safe as its
    parents.  Only calls without user callables are recorded (replaying a lambda could have
    side effects), and ``func`` is pandas' own function, not the capture's wrapper.
    """

    __slots__ = ("args", "func", "kwargs", "name")

    def __init__(self, name: str, func: Callable, args: tuple, kwargs: dict) -> None:
        self.name = name
        self.func = func
        self.args = args
        self.kwargs = kwargs

    def inputs(self) -> list[Any]:
        """The pandas objects among the arguments (in lists and dicts one level deep too)."""
        out: list[Any] = []
        for value in (*self.args, *self.kwargs.values()):
            items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
            out.extend(v for v in items if isinstance(v, pd.DataFrame | pd.Series))
        return out


def record_recipe(result: Any, recipe: Recipe) -> None:
    """Remember how ``result`` was computed (held while ``result`` lives)."""
    _recipes.set(result, recipe)


def recipe_of(obj: Any) -> Recipe | None:
    return _recipes.get(obj)


def record_maker(made: Any, how: tuple) -> None:
    """Remember how a window or grouping of an aggregation's result was made (parent, call,
    arguments): its statistics get a recipe that makes it again (``capture.pandas``)."""
    _makers.set(made, how)


def maker_of(made: Any) -> tuple | None:
    return _makers.get(made)


_recipes = weak_marks()
_makers = weak_marks()


def masking_test(x: str, differ: str, *, nulls_counted: bool) -> str:
    """One SQL aggregate (DuckDB and Spark alike) true when the values ``x`` mask another column of
    the same rows, ``differ`` being the SQL of "x differs from it on this row" (null-safe): as
    ``linking.masked.kept_against`` tests by rows, the rows it differs on hold at most
    ``MASKED_VALUES`` values (missing included) or are fewer than ``MASKED_FEW_ROWS``, and the rows it
    keeps hold at least ``MASKED_KEPT_VALUES`` values. ``nulls_counted``: a copy only missing where
    it differs is no such column (a table of it alone is counted over its known rows)."""
    n_differ = f"sum(CASE WHEN {differ} THEN 1 ELSE 0 END)"
    nulls = f"max(CASE WHEN {differ} AND {x} IS NULL THEN 1 ELSE 0 END)"
    n_values = f"(count(DISTINCT CASE WHEN {differ} THEN {x} END) + {nulls})"
    test = (f"({n_differ} > 0 AND sum(CASE WHEN {differ} THEN 0 ELSE 1 END) > 0"
            f" AND ({n_values} <= {row_limits.MASKED_VALUES} OR {n_differ} < {row_limits.MASKED_FEW_ROWS})"
            f" AND count(DISTINCT CASE WHEN NOT {differ} THEN {x} END) >= {row_limits.MASKED_KEPT_VALUES}")
    if nulls_counted:
        test += f" AND sum(CASE WHEN {differ} AND {x} IS NOT NULL THEN 1 ELSE 0 END) > 0"
    return f"coalesce({test}), false)"
