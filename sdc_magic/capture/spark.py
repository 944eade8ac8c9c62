"""Evidence capture for PySpark (classic sessions and Spark Connect).

Captured: ``df.groupBy(...)`` then ``agg``, ``count``, ``sum``, ``avg``/``mean``, ``min``,
``max``; ``df.groupBy(...).pivot(col[, values])`` then the same (one aggregate column
per pivot value); ``df.crosstab(a, b)`` / ``df.stat.crosstab(a, b)``; any of these sorted with
``orderBy``/``sort``, and a ``groupBy`` table's statistics renamed (``withColumnRenamed``,
``withColumnsRenamed``): the step replayed on the job that computes the facts.

Spark DataFrames are lazy, so nothing runs when the user aggregates: the wrapper records
the recipe (source DataFrame, keys, the user's aggregate expressions). When the result is
displayed or fetched with ``toPandas()``, Spark computes the facts beside it and only one
row per group comes back to the driver:

* ``groupBy`` without a unit column: **one job**, ``source.groupBy(keys).agg(*user_exprs,
  *facts)`` — rows, per variable the units with a value, total, absolute total, negative
  contributions, the largest absolute contribution and the sum of squares, which bound the
  runner-up (``x2`` lies in ``[S/R, √S]`` for the others' sum of squares S and sum R; exact
  with one or two contributors). Only groups whose p% or (n ≥ 2) dominance decision differs
  at the two ends get their exact runner-up, from one more job over those groups (usually
  none). ``max_by(|x|, |x|, k)`` (k > 2 only) and a window maximum were measured 5–7× slower
  at 10M rows (a sort-based aggregation; a shuffle of every row).
* with a unit column, count tables: distinct units estimated in the same job
  (``approx_count_distinct``) and counted exactly where a rule can depend on them;
  magnitudes: the user's own job, and one facts job that first aggregates to one row per
  (keys, unit) — rows, per variable count and sum — then the facts per group from that.
* pivots and crosstabs: the user's own job (Spark's wide result, untouched) and one facts
  job over the long form ``groupBy(keys, pivot)``, whose groups are the wide table's cells.

**Linking** (``rows=`` of :func:`.contract.register`, as for polars and DuckDB): when the table is
materialised, one more job selects, per source row that reached the aggregation, the keys as the
table shows them and the other columns (at most ``MAX_HASHED_COLUMNS``): their values up to
``RAW_LINKED_ROWS`` source rows (fingerprinted by linking like pandas rows, so a Spark table and
a pandas table of the same people are compared), Spark's ``xxhash64`` of them up to
``MAX_FETCHED_ROWS``. Those rows come to the driver; above that, the table is not linked and its
note says so. Before, Spark tables were never linked: two Spark counts one person apart were both
cleared (issue 22). Tables over more than ``IN_ENGINE_ROWS`` source rows whose plan is written over
a root (:mod:`.spark_lineage`) are linked inside Spark instead: no source row to the driver, one
row per atom of the session back, at any size.
Spark Connect DataFrames get the same wrappers (with Connect's own functions) when
``pyspark.sql.connect`` can be imported. Display paths that print data without going
through IPython's formatters — ``show()``, and ``__repr__`` / ``_repr_html_`` when eager
evaluation is on — are intercepted: ``show()`` displays the checked table when the
extension is loaded (and prints a note, never the rows, if that fails); ``__repr__`` gives the
schema only and ``_repr_html_`` nothing, so a front-end falls back to the checked display.
Anything else is displayed without evidence (fail closed).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd

from ..evidence import rows as row_limits
from ..evidence.in_engine import CountedBases
from . import contract, runner_up, spark_lineage
from .entries import MAGNITUDE_EVIDENCE
from .grouped_sql import GroupedQuery, grouped_query

_lock = threading.RLock()
_recipes: dict[int, tuple[Any, Recipe]] = {}
_CAPTURE: SparkCapture | None = None
_TEXT = re.compile(r"^Column<'(.*)'>$", re.S)
_CONNECT = "pyspark.sql.connect"


class Recipe:
    """A captured aggregation: how to compute its facts (and, for ``groupBy``, its columns)."""

    def __init__(self, source: Any, keys: list[str], exprs: list[Any], measures: dict[str, tuple[str | None, str]],
                 kind: str = "group", pivot: str | None = None, values: list[Any] | None = None,
                 by: list[str] | None = None):
        self.source = source
        self.keys = keys  # the evidence keys: the group-by keys (and the pivot column, by its label)
        self.by = by if by is not None else keys  # source columns grouped by (crosstab: its two columns)
        self.exprs = exprs
        self.measures = measures
        self.kind = kind  # "group" | "pivot" | "crosstab"
        self.pivot = pivot
        self.values = values
        self.form: pd.DataFrame | None = None
        self.unit: str | None = None
        self.variables: list[str] = []
        self.lock = threading.Lock()
        #: row-preserving steps the user applied to the aggregate (``orderBy``/``sort``), replayed
        #: on the job that computes the user's columns with the facts
        self.post: list[tuple[str, tuple, dict]] = []
        #: the user's columns are fetched from the user's own DataFrame, the facts by a job of their
        #: own (``spark.sql``: its ORDER BY and its exact result are the user's, the recipe only
        #: says how its groups were made)
        self.own_job = False

    def then(self, name: str, args: tuple, kwargs: dict, renamed: dict[str, str] | None = None) -> Recipe:
        """The recipe of this aggregate followed by a step that keeps its rows (its own form);
        ``renamed``: the step renames these statistics' columns."""
        measures = self.measures if not renamed else {renamed.get(m, m): st for m, st in self.measures.items()}
        out = Recipe(self.source, self.keys, self.exprs, measures, self.kind, self.pivot, self.values, self.by)
        out.post = [*self.post, (name, args, kwargs)]
        out.own_job = self.own_job
        return out


def _functions(df: Any) -> Any:
    """The functions module matching a DataFrame's flavour (Connect columns for Connect)."""
    if type(df).__module__.startswith(_CONNECT):
        from pyspark.sql.connect.functions import builtin as F
        return F
    from pyspark.sql import functions as F
    return F


def _window(df: Any) -> Any:
    if type(df).__module__.startswith(_CONNECT):
        from pyspark.sql.connect.window import Window
        return Window
    from pyspark.sql import Window
    return Window


def _stat(expr: Any, out_name: str) -> tuple[str | None, str]:
    import sqlglot

    from .sql import stat_of

    m = _TEXT.match(str(expr))
    # (Spark Connect writes ``count("*")`` as ``count(unresolvedstar())``: read as the ``count(*)`` it
    # is, from the expression's tree — a column *named* ``unresolvedstar()`` is no star, red team;
    # before, such a table was "row-level data", blocked)
    text = "count(*)" if _connect_count_star(expr) else m.group(1) if m else str(expr)
    try:
        node = sqlglot.parse_one(text, read="spark")
    except Exception:
        return None, "custom"
    var, stat, _ = stat_of(node)
    if stat == "count" and out_name != f"count({var})":
        # Spark prints count(DISTINCT x) as count(x) once aliased: ambiguous, so not a plain count
        return var, "nunique" if out_name.lower().startswith("count(distinct") else "custom"
    return var, stat


def _connect_count_star(column: Any) -> bool:
    """Whether a Spark Connect column is ``count(*)`` (possibly aliased), read from its tree."""
    expr = getattr(column, "_expr", None)
    if expr is None or not type(expr).__module__.startswith(_CONNECT):
        return False
    from pyspark.sql.connect.expressions import ColumnAlias, UnresolvedFunction, UnresolvedStar

    while isinstance(expr, ColumnAlias):
        expr = expr._child
    return (isinstance(expr, UnresolvedFunction) and str(expr._name).lower() == "count" and not expr._is_distinct
            and len(expr._args) == 1 and isinstance(expr._args[0], UnresolvedStar)
            and not getattr(expr._args[0], "_unparsed_target", None))


def spark_form(df: Any, limit: int | None) -> pd.DataFrame | None:
    """The checked pandas form of a captured Spark result (runs its evidence job once)."""
    with _lock:
        hit = _recipes.get(id(df))
    if hit is None or hit[0]() is not df or _CAPTURE is None:
        return None
    return _CAPTURE.materialise(df, hit[1], limit)


def _extension_loaded() -> bool:
    """Whether sdc_magic's display handlers are installed in a running IPython."""
    ext = sys.modules.get("sdc_magic.jupyter.extension")
    return bool(ext is not None and getattr(ext, "_installed", {}).get("formatters"))


class SparkCapture:
    """Installs and removes the PySpark wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, bool, Any]] = []
        self._groups: dict[int, tuple[Any, tuple[Any, list[str], str | None, list[Any] | None]]] = {}
        self._counted = CountedBases()  # (bases counted in Spark: their smaller tables are too)
        self.installed = False

    def install(self) -> None:
        global _CAPTURE
        if self.installed:
            return
        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.group import GroupedData

        flavours: list[tuple[type, type]] = [(DataFrame, GroupedData)]
        connect = _connect_classes()
        if connect is not None:
            flavours.append(connect)
        for frame_cls, group_cls in flavours:
            for name in ("groupBy", "groupby"):
                if name in frame_cls.__dict__:
                    self._patch(frame_cls, name, self._group_by(frame_cls.__dict__[name]))
            self._patch(group_cls, "pivot", self._pivot(group_cls.__dict__["pivot"]))
            for name in ("agg", "count", "sum", "avg", "mean", "min", "max"):
                if name in group_cls.__dict__:
                    self._patch(group_cls, name, self._aggregate(group_cls.__dict__[name], name))
            self._patch(frame_cls, "crosstab", self._crosstab(frame_cls.__dict__["crosstab"]))
            for name in ("orderBy", "sort", "withColumnRenamed", "withColumnsRenamed"):
                if name in frame_cls.__dict__:
                    self._patch(frame_cls, name, self._after_aggregation(frame_cls.__dict__[name], name))
            self._patch(frame_cls, "toPandas", self._to_pandas(frame_cls.__dict__["toPandas"]))
            self._patch(frame_cls, "show", self._show(frame_cls.__dict__["show"]))
            self._patch(frame_cls, "__repr__", self._repr(frame_cls.__dict__["__repr__"]))
            self._patch(frame_cls, "_repr_html_", self._repr_html(frame_cls.__dict__["_repr_html_"]))
        for session_cls in _session_classes():
            if "sql" in session_cls.__dict__:
                self._patch(session_cls, "sql", self._sql(session_cls.__dict__["sql"]))
        _CAPTURE = self
        self.installed = True

    def uninstall(self) -> None:
        global _CAPTURE
        for owner, name, had, original in reversed(self._saved):
            if had:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._saved.clear()
        self._groups.clear()
        with _lock:
            _recipes.clear()
        if _CAPTURE is self:
            _CAPTURE = None
        self.installed = False

    def _patch(self, owner: type, name: str, wrapper: Callable) -> None:
        had = name in owner.__dict__
        self._saved.append((owner, name, had, owner.__dict__.get(name)))
        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)

    def _original(self, owner: type, name: str) -> Callable:
        for cls in owner.__mro__:
            for o, n, _had, original in self._saved:
                if o is cls and n == name:
                    # past every wrapper (another session's installed before ours would run its
                    # check again from inside this one)
                    while getattr(original, "__sdc_magic_wrapper__", False) and hasattr(original, "__wrapped__"):
                        original = original.__wrapped__
                    return original
        return getattr(owner, name)

    # ------------------------------------------------------------ wrappers
    def _group_by(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def group_by(df: Any, *cols: Any) -> Any:
            gd = original(df, *cols)
            keys = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)
            if keys and all(isinstance(k, str) for k in keys):
                _keep(self._groups, gd, (df, keys, None, None))
            return gd

        return group_by

    def _pivot(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def pivot(gd: Any, pivot_col: Any, values: Any = None) -> Any:
            out = original(gd, pivot_col) if values is None else original(gd, pivot_col, values)
            with contextlib.suppress(Exception):
                hit = self._groups.get(id(gd))
                if hit is not None and hit[0]() is gd and isinstance(pivot_col, str) and hit[1][2] is None:
                    df, keys = hit[1][0], hit[1][1]
                    if pivot_col not in keys:
                        _keep(self._groups, out, (df, keys, pivot_col, list(values) if values is not None else None))
            return out

        return pivot

    def _aggregate(self, original: Callable, name: str) -> Callable:
        @functools.wraps(original)
        def aggregate(gd: Any, *args: Any) -> Any:
            result = original(gd, *args)
            try:
                hit = self._groups.get(id(gd))
                if hit is not None and hit[0]() is gd:
                    df, keys, pivot, values = hit[1]
                    self._record(df, keys, name, args, result, pivot, values)
            except Exception as exc:  # never break user code: shown without evidence
                self.registry.failures.append(f"spark: {type(exc).__name__}: {exc}")
            return result

        return aggregate

    def _sql(self, original: Callable) -> Callable:
        """``spark.sql(query)`` of a plain grouped query: captured as the ``groupBy`` it stands for
        (:mod:`.grouped_sql`); anything else is returned as it is, untouched."""
        @functools.wraps(original)
        def sql(session: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(session, query, *args, **kwargs)
            if args or kwargs:
                return result  # (parameters bound into the query: not read)
            try:
                grouped = grouped_query(query, "spark")
                if grouped is not None:
                    self._record_sql(session, grouped, result)
            except Exception as exc:  # never break user code: shown without evidence
                self.registry.failures.append(f"spark sql: {type(exc).__name__}: {exc}")
            return result

        return sql

    def _record_sql(self, session: Any, grouped: GroupedQuery, result: Any) -> None:
        columns = list(result.columns)
        if len(columns) != grouped.width or len(set(columns)) != len(columns):
            return
        source = session.table(grouped.table)
        if grouped.where is not None:
            source = source.where(grouped.where)
        F = _functions(source)
        if grouped.renamed:  # (a key shown under another name: grouped by a copy under that name)
            if {new.lower() for _, new in grouped.renamed} & {c.lower() for c in source.columns}:
                return
            source = source.withColumns({new: F.col(old) for old, new in grouped.renamed})
        names = [columns[i] for i, _, _ in grouped.aggregates]
        if [c for c in columns if c not in grouped.keys] != names:
            return
        exprs = [F.expr(text).alias(name) for (_, text, _), name in zip(grouped.aggregates, names, strict=True)]
        measures = {name: stat for (_, _, stat), name in zip(grouped.aggregates, names, strict=True)}
        recipe = Recipe(source, list(grouped.keys), exprs, measures)
        recipe.own_job = True
        with _lock:
            _keep(_recipes, result, recipe)

    def _crosstab(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def crosstab(df: Any, col1: str, col2: str) -> Any:
            result = original(df, col1, col2)
            try:
                if isinstance(col1, str) and isinstance(col2, str) and col1 != col2:
                    label = f"{col1}_{col2}"
                    recipe = Recipe(df, [label, col2], [], {"": (None, "size")}, kind="crosstab",
                                    pivot=col2, by=[col1, col2])
                    with _lock:
                        _keep(_recipes, result, recipe)
            except Exception as exc:
                self.registry.failures.append(f"spark crosstab: {type(exc).__name__}: {exc}")
            return result

        return crosstab

    def _after_aggregation(self, original: Callable, name: str) -> Callable:
        """``orderBy``/``sort`` or ``withColumnRenamed``/``withColumnsRenamed`` of a captured
        aggregate: the same table in another order or under other statistic names, captured too.

        Why: ``df.groupBy(k).count().orderBy(k).toPandas()`` (or ``.withColumnRenamed("count",
        "n")``) is how Spark users write a table; the new DataFrame had no recipe, so it was checked
        as row-level data (``blocked``, its figures on screen). The step is replayed on the job that
        computes the user's columns with the facts (:func:`_following`); a table sorted by value is
        then treated as any table whose rows follow their values (``checking/selection.py``). A step
        the facts job cannot replay (a column bound to another DataFrame) runs the user's own job
        beside the facts job.
        """
        @functools.wraps(original)
        def after(df: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(df, *args, **kwargs)
            try:
                with _lock:
                    hit = _recipes.get(id(df))
                    recipe = hit[1] if hit is not None and hit[0]() is df else None
                    following = None if recipe is None else _following(recipe, name, args, kwargs)
                    if following is not None:
                        _keep(_recipes, result, following)
            except Exception as exc:  # never break user code
                self.registry.failures.append(f"spark {name}: {type(exc).__name__}: {exc}")
            return result

        return after

    def _to_pandas(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def to_pandas(df: Any) -> Any:
            with _lock:
                hit = _recipes.get(id(df))
            if hit is None or hit[0]() is not df:
                return original(df)
            recipe = hit[1]
            try:
                user, facts = self._run(df, recipe, None, original)
            except Exception as exc:
                self.registry.failures.append(f"spark toPandas: {type(exc).__name__}: {exc}")
                return original(df)
            try:
                self._register(recipe, facts, user)
            except Exception as exc:  # the user's result stands; it is checked without evidence
                self.registry.failures.append(f"spark toPandas: {type(exc).__name__}: {exc}")
            return user

        return to_pandas

    def _show(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def show(df: Any, n: int = 20, truncate: bool | int = True, vertical: bool = False) -> None:
            if not _extension_loaded():
                return original(df, n, truncate, vertical)
            try:
                from IPython.display import display

                captured = False
                with _lock:
                    hit = _recipes.get(id(df))
                    captured = hit is not None and hit[0]() is df
                display(df if captured else df.limit(int(n)))
            except Exception as exc:  # fail closed: a note, never the rows
                self.registry.failures.append(f"spark show: {type(exc).__name__}: {exc}")
                print("sdc_magic: this Spark table could not be checked and is not shown "
                      "(display it, or `%sdc debug`).")
            return None

        return show

    def _repr(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def spark_repr(df: Any) -> str:
            # eager evaluation makes repr() print rows: the schema only, as without it
            try:
                return "DataFrame[{}]".format(", ".join(f"{n}: {t}" for n, t in df.dtypes))
            except Exception:
                return f"<{type(df).__name__}: not shown (sdc_magic)>"

        return spark_repr

    def _repr_html(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def repr_html(df: Any) -> None:
            return None  # displays go through the checked display handler

        return repr_html

    # ------------------------------------------------------------ recording
    def _record(self, source: Any, keys: list[str], name: str, args: tuple, result: Any,
                pivot: str | None = None, values: list[Any] | None = None) -> None:
        F = _functions(source)
        if name == "agg":
            if len(args) == 1 and isinstance(args[0], dict):
                exprs = [getattr(F, stat if stat != "mean" else "avg")(col) for col, stat in args[0].items()]
            else:
                exprs = list(args)
        elif name == "count":
            exprs = [F.count(F.lit(1)).alias("count")]
        else:
            if not args:
                return  # all numeric columns: not captured (shown without evidence)
            fn = "avg" if name == "mean" else name
            exprs = [getattr(F, fn)(c) for c in args]
        if pivot is not None:
            if len(exprs) != 1:
                return  # several aggregates per pivot value: shown without evidence
            stat = (None, "size") if name == "count" else _stat(exprs[0], _out_name(exprs[0]))
            recipe = Recipe(source, [*keys, pivot], exprs, {"": stat}, kind="pivot", pivot=pivot,
                            values=values, by=[*keys, pivot])
        else:
            out_names = [c for c in result.columns if c not in keys]
            if len(out_names) != len(exprs):
                return
            measures = {out: _stat(e, out) for out, e in zip(out_names, exprs, strict=True)}
            if name == "count":
                measures = {"count": (None, "size")}
            recipe = Recipe(source, keys, exprs, measures)
        with _lock:
            _keep(_recipes, result, recipe)

    def _plan(self, recipe: Recipe, unit: str | None) -> tuple[list[str], set[str]]:
        schema = dict(recipe.source.dtypes)
        variables = sorted({v for v, s in recipe.measures.values() if v in schema and s != "size"})
        numeric = {"int", "bigint", "smallint", "tinyint", "double", "float", "boolean"}
        magnitudes = {v for v, s in recipe.measures.values()
                      if v in variables and s in MAGNITUDE_EVIDENCE
                      and (schema[v] in numeric or schema[v].startswith("decimal"))}
        return variables, magnitudes

    def _keyed_source(self, recipe: Recipe) -> tuple[Any, list[str]]:
        """The source with the evidence keys as columns (a pivot or crosstab column by its label)."""
        F = _functions(recipe.source)
        src = recipe.source
        if recipe.kind == "group":
            return src, recipe.keys
        if recipe.kind == "pivot":
            if recipe.values is not None:
                src = src.filter(F.col(recipe.pivot).isin(list(recipe.values)))
            cols = [F.col(k) for k in recipe.keys[:-1]] + [_label(F, recipe.pivot).alias(recipe.keys[-1])]
        else:  # crosstab: both columns as strings, as Spark labels them
            a, b = recipe.by
            cols = [_label(F, a).alias(recipe.keys[0]), _label(F, b).alias(recipe.keys[1])]
        used = {c for c in src.columns if c not in recipe.by}
        return src.select(*cols, *[F.col(c) for c in used]), recipe.keys

    def _facts_job(self, recipe: Recipe, unit: str | None, variables: list[str], magnitudes: set[str], k: int,
                   user_exprs: list[Any]) -> tuple[Any, Any, dict[int, Any], list[str]]:
        """(the facts job, the frame of contributions, variable i's contribution column, keys).

        The contributions are the source rows, or with a unit column one row per (keys, unit)
        holding each variable's sum (a unit's contribution).
        """
        src, keys = self._keyed_source(recipe)
        F = _functions(src)
        p = contract.PREFIX
        wanted = [i for i, v in enumerate(variables) if v in magnitudes]
        if unit is None:
            values = {i: F.col(variables[i]) for i in wanted}
            job = _aggregate_facts(src, keys, values, len(variables), k, F, rows=F.count(F.lit(1)), units=None,
                                   user_exprs=user_exprs, present=lambda i: F.count(F.col(variables[i])))
            return job, src, values, keys
        inner = [F.count(F.lit(1)).alias(f"{p}r")]
        for i, v in enumerate(variables):
            inner.append(F.count(F.col(v)).alias(f"{p}c{i}"))
            if v in magnitudes:
                inner.append(F.sum(F.col(v).cast("double")).alias(f"{p}s{i}"))
        per_unit = src.groupBy(*keys, unit).agg(*inner)
        values = {i: F.when(F.col(f"{p}c{i}") > 0, F.col(f"{p}s{i}")) for i in wanted}
        job = _aggregate_facts(per_unit, keys, values, len(variables), k, F, rows=F.sum(F.col(f"{p}r")),
                               units=F.count(F.lit(1)), user_exprs=[],
                               present=lambda i: F.sum(F.when(F.col(f"{p}c{i}") > 0, 1).otherwise(0)))
        return job, per_unit, values, keys

    def _run(self, df: Any, recipe: Recipe, limit: int | None, to_pandas: Callable | None = None
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(the user's result, the facts), both as pandas: one job, or the user's and one facts job
        (plus, rarely, a job for the exact runner-up of the groups whose decision needs it)."""
        rules = self.rules()
        schema = dict(recipe.source.dtypes)
        unit = rules.unit if rules.unit in schema and rules.unit not in recipe.by else None
        variables, magnitudes = self._plan(recipe, unit)
        fetch = to_pandas or self._original(type(df), "toPandas")
        recipe.unit, recipe.variables = unit, variables
        if recipe.own_job:  # (every group's facts: the user's rows may come in another order)
            user = fetch(df if limit is None else df.limit(limit))
            job, contrib, values, keys = self._facts_job(recipe, unit, variables, magnitudes, rules.top_k, [])
            return user, self._second(fetch(job), contrib, values, keys, rules, fetch)
        if unit is not None and all(st in ("size", "count") for _, st in recipe.measures.values()):
            return self._run_unit_counts(df, recipe, unit, variables, limit, fetch, rules)
        one_job = None
        if recipe.kind == "group" and unit is None:
            job, contrib, values, keys = self._facts_job(recipe, None, variables, magnitudes, rules.top_k,
                                                         recipe.exprs)
            try:
                for name, args, kwargs in recipe.post:
                    job = getattr(job, name)(*args, **kwargs)
                one_job = fetch(job if limit is None else job.limit(limit))
            except Exception:
                if not recipe.post:
                    raise
                # a sort the facts job cannot replay (a column bound to the user's DataFrame):
                # the user's own job, and the facts in another
        if one_job is not None:
            facts = one_job
            user = facts[[c for c in facts.columns if not str(c).startswith(contract.PREFIX)]].copy()
        else:
            user = fetch(df if limit is None else df.limit(limit))
            job, contrib, values, keys = self._facts_job(recipe, unit, variables, magnitudes, rules.top_k, [])
            facts = fetch(job)
        facts = self._second(facts, contrib, values, keys, rules, fetch)
        return user, facts

    def _run_unit_counts(self, df: Any, recipe: Recipe, unit: str, variables: list[str], limit: int | None,
                         fetch: Callable, rules: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Count tables with a unit column: distinct units estimated in the same job as the
        user's columns (``approx_count_distinct``, HyperLogLog++, 1 % error: one hash
        aggregation, no shuffle of (keys, unit) pairs), and counted exactly by one more job over
        the groups where a rule can depend on them (an estimate below twice the largest unit
        threshold: the frequency threshold and the dof rule), usually few. Only count tables take
        this path, whose rules read units through those thresholds only. Missing unit ids count
        as one unit (as in pandas)."""
        import numpy as np

        src, keys = self._keyed_source(recipe)
        F = _functions(src)
        p = contract.PREFIX
        u = F.col(unit)

        def units_exprs(distinct: Callable[[Any], Any]) -> list[Any]:
            out = [(distinct(u) + F.max(F.when(u.isNull(), 1).otherwise(0))).alias(f"{p}units")]
            for i, v in enumerate(variables):
                has = F.col(v).isNotNull()
                out.append((distinct(F.when(has, u)) + F.max(F.when(has & u.isNull(), 1).otherwise(0)))
                           .alias(contract.fact_names(i)["n"]))
            return out

        exprs = [F.count(F.lit(1)).alias(f"{p}rows"), *units_exprs(lambda c: F.approx_count_distinct(c, 0.01))]
        if recipe.kind == "group":
            job = src.groupBy(*keys).agg(*recipe.exprs, *exprs)
            facts = fetch(job if limit is None else job.limit(limit))
            user = facts[[c for c in facts.columns if not str(c).startswith(contract.PREFIX)]].copy()
        else:
            user = fetch(df if limit is None else df.limit(limit))
            facts = fetch(src.groupBy(*keys).agg(*exprs))
        names = [f"{p}units"] + [contract.fact_names(i)["n"] for i in range(len(variables))]
        bound = 2 * max(int(rules.threshold), int(rules.dof or 0) + 1)
        estimates = facts[names].apply(pd.to_numeric, errors="coerce").fillna(0)
        low = (estimates.min(axis=1) < bound).to_numpy()
        if low.any():
            small = facts.loc[low, keys].copy()
            small.columns = [f"{p}k{j}" for j in range(len(keys))]
            small[f"{p}g"] = np.arange(len(small), dtype=np.int64)
            wanted = src.sparkSession.createDataFrame(small)
            cond = [src[key].eqNullSafe(wanted[f"{p}k{j}"]) for j, key in enumerate(keys)]
            exact = fetch(src.join(F.broadcast(wanted), cond, "inner").groupBy(f"{p}g")
                          .agg(*units_exprs(lambda c: F.countDistinct(c))))
            rows = np.flatnonzero(low)[exact[f"{p}g"].to_numpy(dtype=np.int64)]
            facts = facts.copy()
            for name in names:
                values = facts[name].to_numpy(dtype=np.int64, copy=True)
                values[rows] = exact[name].to_numpy(dtype=np.int64)
                facts[name] = values
        return user, facts

    def _second(self, facts: pd.DataFrame, contrib: Any, values: dict[int, Any], keys: list[str], rules: Any,
                fetch: Callable) -> pd.DataFrame:
        """The top-2 contributions per group from (max, sum of squares), exact where it matters
        (:mod:`.runner_up`): the groups that need it (a rule reading x2 fails or might, negative
        contributions) get their exact runner-up from one more job over those groups only."""
        facts = facts.copy()
        for i, x in values.items():
            if runner_up.top1_name(i) not in facts.columns:
                continue
            x1, second, unsure = runner_up.bounds(facts, i, rules)
            second = second.copy()
            if unsure.any():
                second[unsure] = self._runner_up(facts.loc[unsure, keys], x1[unsure], contrib, x, keys, fetch)
            runner_up.set_tops(facts, i, x1, second)
        return facts

    def _runner_up(self, groups: pd.DataFrame, x1: Any, contrib: Any, x: Any, keys: list[str],
                   fetch: Callable) -> Any:
        """The exact second largest |contribution| of the given groups: their maxima (a few rows,
        broadcast) joined back to the contributions, one hash aggregation."""
        import numpy as np

        F = _functions(contrib)
        p = contract.PREFIX
        small = groups.copy()
        small.columns = [f"{p}k{j}" for j in range(len(keys))]
        small[f"{p}m"] = np.asarray(x1, dtype=float)
        small[f"{p}g"] = np.arange(len(small), dtype=np.int64)
        maxima = contrib.sparkSession.createDataFrame(small)
        cond = [contrib[key].eqNullSafe(maxima[f"{p}k{j}"]) for j, key in enumerate(keys)]
        a = F.abs(x.cast("double"))
        m = F.col(f"{p}m")
        joined = contrib.join(F.broadcast(maxima), cond, "inner")
        out = fetch(joined.groupBy(f"{p}g").agg(F.max(F.when(a < m, a)).alias(f"{p}second"),
                                                F.sum(F.when(a == m, 1).otherwise(0)).alias(f"{p}ties")))
        second = np.zeros(len(small))
        g = out[f"{p}g"].to_numpy(dtype=np.int64)
        runner = pd.to_numeric(out[f"{p}second"], errors="coerce").fillna(0.0).to_numpy(dtype=float)
        ties = pd.to_numeric(out[f"{p}ties"], errors="coerce").fillna(0).to_numpy(dtype=float)
        second[g] = np.where(ties >= 2, small[f"{p}m"].to_numpy()[g], runner)
        return second

    def materialise(self, df: Any, recipe: Recipe, limit: int | None) -> pd.DataFrame | None:
        with recipe.lock:
            if recipe.form is not None:
                return recipe.form
            user, facts = self._run(df, recipe, limit)
            self._register(recipe, facts, user, truncated=limit is not None and len(facts) >= limit)
            return recipe.form

    def _register(self, recipe: Recipe, facts: pd.DataFrame, user: pd.DataFrame, truncated: bool = False) -> None:
        """Register a materialised table's evidence. ``truncated``: a display fetched only its first
        groups (``display.max_rows + 1``), so the facts' rows are a lower bound of the table's."""
        rules = self.rules()
        notes: list[str] = []
        if rules.unit is not None and recipe.unit is None:
            notes.append(f"unit column {rules.unit!r} not found for this table: rows counted as units")
        from .polars import set_indicators

        ge = contract.group_evidence_from_facts(facts, recipe.keys, recipe.variables, rules.top_k, recipe.unit)
        set_indicators(facts, ge, recipe.variables)
        if recipe.kind == "group":
            shown = contract.keyed(user.copy(), recipe.keys)
            call = "spark groupBy.agg"
        else:
            index = recipe.keys[:-1]
            shown = user.set_index(index) if index else user.copy()
            shown.columns = pd.Index([str(c) for c in shown.columns], name=recipe.keys[-1])
            call = f"spark {recipe.kind}"
        measures = recipe.measures
        measure_of = (lambda m: measures[""]) if recipe.kind != "group" else \
            (lambda m: measures.get(m, (None, "custom")))
        n_rows = int(pd.to_numeric(facts[f"{contract.PREFIX}rows"], errors="coerce").fillna(0).sum()) \
            if f"{contract.PREFIX}rows" in facts.columns else 0
        rows: Any = None
        large = n_rows > row_limits.IN_ENGINE_ROWS or truncated
        countable = rules.unit is None or recipe.unit is not None  # (a unit declared: found in the source)
        if self._counted.worth_trying(large) and countable:
            # no row leaves Spark (the groups of a truncated display are not all of the table's)
            rows = self._counted.keep(self._in_engine_rows(recipe, ge, None if truncated else facts), large)
        if rows is None:
            rows = self._linking_rows(recipe, n_rows)
            if isinstance(rows, pd.DataFrame) and not large and countable \
                    and not row_limits.told_apart_by_content(rows):  # (repeated rows: counted in Spark)
                counted = self._counted.keep(self._in_engine_rows(recipe, ge, None if truncated else facts), True)
                rows = counted if counted is not None else rows
        if rows is None:
            notes.append(row_limits.too_many_rows_note(row_limits.MAX_FETCHED_ROWS)
                         if n_rows > row_limits.MAX_FETCHED_ROWS else row_limits.unreadable_rows_note())
        contract.register(self.registry, rules, call, shown, ge, recipe.keys, measure_of, notes, rows=rows)
        if recipe.form is None:
            recipe.form = shown


    def _in_engine_rows(self, recipe: Recipe, ge: Any, facts: pd.DataFrame | None) -> Any:
        """The table's rows left in Spark (:mod:`.spark_lineage`), or None (linked by its rows).
        ``facts``: the table's groups, when they are all there."""
        try:
            src, keys = self._keyed_source(recipe)
        except Exception:
            return None

        # (Spark's own methods, found now: the count runs at a later display, perhaps after this
        # capture is uninstalled and another's wrappers are in place)
        grouping, converting = self._original(type(src), "groupBy"), self._original(type(src), "toPandas")

        def group_by(df: Any, cols: list[str]) -> Any:
            return grouping(df, *cols)

        def to_pandas(df: Any) -> pd.DataFrame:
            return converting(df)

        return spark_lineage.in_engine_rows(src, keys, recipe.measures, ge, facts, group_by, to_pandas, recipe.unit)

    def _linking_rows(self, recipe: Recipe, n_rows: int) -> pd.DataFrame | None:
        """The rows behind the table for linking (one job), or None (too many, or unreadable).

        Per source row reaching the aggregation: the evidence keys as the table shows them and
        the other source columns, values (up to ``RAW_LINKED_ROWS`` rows) or Spark's hashes of
        them in columns ``"spark#<column>"``. A table of one variable's statistics without a
        count covers the rows where that variable is known (as for pandas and polars).
        """
        if n_rows <= 0 or n_rows > row_limits.MAX_FETCHED_ROWS:
            return None
        try:
            src, keys = self._keyed_source(recipe)
            F = _functions(src)
            room = max(row_limits.MAX_HASHED_COLUMNS - len(keys), 1)
            names = [c for c in src.columns if c not in keys and not c.startswith(contract.PREFIX)][:room]
            if n_rows <= row_limits.RAW_LINKED_ROWS:
                others = [_named(F, c).alias(c) for c in names]
            else:
                others = [F.xxhash64(_named(F, c)).alias(f"spark#{c}") for c in names]
            stats = {st for _, st in recipe.measures.values()}
            variables = {v for v, _ in recipe.measures.values() if v is not None}
            if "size" not in stats and len(variables) == 1 and next(iter(variables)) in src.columns:
                src = src.filter(_named(F, next(iter(variables))).isNotNull())
            query = src.select(*[_named(F, k).alias(k) for k in keys], *others)
            rows = self._original(type(query), "toPandas")(query)
        except Exception:
            return None
        return rows if 0 < len(rows) <= row_limits.MAX_FETCHED_ROWS else None


def _following(recipe: Recipe, name: str, args: tuple, kwargs: dict) -> Recipe | None:
    """The recipe of ``recipe``'s table after the step ``name(*args, **kwargs)``, or None when the
    step is not one that keeps the table: a sort, or a ``groupBy`` table's statistics renamed (a
    renamed key, or a pivot's or crosstab's column, leaves the result uncaptured)."""
    if name in ("orderBy", "sort"):
        return recipe.then(name, args, kwargs)
    mapping = _renaming(name, args, kwargs)
    if (recipe.kind == "group" and mapping and set(mapping) <= set(recipe.measures)
            and not set(mapping.values()) & (set(recipe.keys) | (set(recipe.measures) - set(mapping)))):
        # (a new name that is a key or another statistic's: two columns of one name, not captured)
        return recipe.then(name, args, kwargs, renamed=mapping)
    return None


def _renaming(name: str, args: tuple, kwargs: dict) -> dict[str, str] | None:
    """{old: new} of a ``withColumnRenamed(old, new)`` or ``withColumnsRenamed({old: new})`` call."""
    if name == "withColumnRenamed":
        got = dict(zip(("existing", "new"), args, strict=False)) | kwargs
        old, new = got.get("existing"), got.get("new")
        return {old: new} if isinstance(old, str) and isinstance(new, str) else None
    mapping = args[0] if args else kwargs.get("colsMap")
    if isinstance(mapping, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        return dict(mapping)
    return None


def _named(F: Any, column: str) -> Any:
    """A source column by its name (a name with a dot or a backtick is not a path into a struct)."""
    return F.col("`" + str(column).replace("`", "``") + "`")


def _aggregate_facts(frame: Any, keys: list[str], values: dict[int, Any], n_vars: int, k: int, F: Any,
                     rows: Any, units: Any, user_exprs: list[Any], present: Callable[[int], Any]) -> Any:
    """``frame.groupBy(keys).agg(user_exprs, facts)``: one hash aggregation, one job.

    ``values[i]`` is variable i's contribution per row of ``frame`` (a source row, or a unit's
    sum after the per-unit pre-aggregation). The largest contribution is ``max(|x|)`` and the
    sum of squares bounds the runner-up (see :meth:`SparkCapture._second`); k > 2 uses
    ``max_by(|x|, |x|, k)`` (a sort-based aggregation: slower).
    """
    p = contract.PREFIX
    exprs = [rows.alias(f"{p}rows")]
    if units is not None:
        exprs.append(units.alias(f"{p}units"))
    for i in range(n_vars):
        exprs.append(present(i).alias(contract.fact_names(i)["n"]))
    for i, value in values.items():
        names = contract.fact_names(i)
        x = value.cast("double")
        a = F.abs(x)
        exprs += [F.sum(x).alias(names["t"]), F.sum(a).alias(names["ta"]), F.max(x < 0).alias(names["neg"]),
                  F.sum(x * x).alias(f"{p}sq_{i}")]
        if units is None:  # indicator facts (row values)
            exprs += [F.min(x).alias(f"{p}lo_{i}"), F.max(x).alias(f"{p}hi_{i}"), F.count(x).alias(f"{p}cnt_{i}")]
        if k == 2:
            exprs.append(F.max(a).alias(f"{p}top1_{i}"))
        else:
            exprs.append(F.max_by(a, a, k).alias(names["top"]))
    return frame.groupBy(*keys).agg(*user_exprs, *exprs)


def _label(F: Any, column: str) -> Any:
    """A column's values as Spark names them in a pivot's or crosstab's labels ("null" for null)."""
    return F.coalesce(F.col(column).cast("string"), F.lit("null"))


def _out_name(expr: Any) -> str:
    m = _TEXT.match(str(expr))
    return m.group(1) if m else str(expr)


def _session_classes() -> list[type]:
    """The SparkSession classes whose ``sql`` is read (classic, and Connect when installed)."""
    from pyspark.sql.session import SparkSession

    found = [SparkSession]
    if _connect_classes() is not None:
        try:
            from pyspark.sql.connect.session import SparkSession as ConnectSession
            found.append(ConnectSession)
        except Exception:
            pass
    return found


def _connect_classes() -> tuple[type, type] | None:
    """Spark Connect's DataFrame and GroupedData, when Connect's dependencies are installed."""
    import importlib.util
    import warnings

    try:
        if importlib.util.find_spec("grpc") is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pyspark.sql.connect.dataframe import DataFrame
            from pyspark.sql.connect.group import GroupedData
        return DataFrame, GroupedData
    except Exception:
        return None


def _keep(store: dict, obj: Any, value: Any) -> None:
    key = id(obj)

    def drop(_r: Any, _suppress: Any = contextlib.suppress) -> None:
        with _suppress(Exception):  # bound early: at interpreter shutdown module globals are gone
            store.pop(key, None)

    try:
        ref = weakref.ref(obj, drop)
    except TypeError:
        return
    if len(store) > 1024:
        store.clear()
    store[key] = (ref, value)
