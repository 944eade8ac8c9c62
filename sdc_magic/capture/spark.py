"""Evidence capture for PySpark (classic sessions): ``df.groupBy(...)`` then ``agg``,
``count``, ``sum``, ``avg``/``mean``, ``min``, ``max``.

Spark DataFrames are lazy, so nothing runs when the user aggregates: the wrapper records
the recipe (source DataFrame, keys, the user's aggregate expressions). When the result is
displayed or fetched with ``toPandas()``, *one* Spark job computes the user's columns and
the facts together: ``source.groupBy(keys).agg(*user_exprs, *facts)`` with rows,
distinct units (``count(DISTINCT unit)``), and per variable the units with a value, total,
absolute total, negative contributions and the k largest absolute contributions
(``max_by(abs(x), abs(x), k)``, Spark ≥ 4). Only the aggregated rows come back to the
driver; on a cluster (or Spark Connect) the same code runs one job there, and moves one
row per group. With a unit column and magnitudes, contributions are first summed per
(group, unit): one more job. Anything else is displayed without evidence (fail closed).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import contract

_lock = threading.RLock()
_recipes: dict[int, tuple[Any, Recipe]] = {}
_CAPTURE: SparkCapture | None = None
_TEXT = re.compile(r"^Column<'(.*)'>$", re.S)


class Recipe:
    """A captured aggregation: how to recompute it with its facts."""

    def __init__(self, source: Any, keys: list[str], exprs: list[Any], measures: dict[str, tuple[str | None, str]]):
        self.source = source
        self.keys = keys
        self.exprs = exprs
        self.measures = measures
        self.form: pd.DataFrame | None = None
        self.lock = threading.Lock()


def _stat(expr: Any, out_name: str) -> tuple[str | None, str]:
    import sqlglot

    from .duckdb import _stat_of

    m = _TEXT.match(str(expr))
    text = m.group(1) if m else str(expr)
    try:
        node = sqlglot.parse_one(text, read="spark")
    except Exception:
        return None, "custom"
    var, stat, _ = _stat_of(node)
    if stat == "count" and out_name != f"count({var})":
        # Spark prints count(DISTINCT x) as count(x) once aliased: ambiguous, so not a plain count
        return var, "nunique" if out_name.lower().startswith("count(distinct") else "custom"
    return var, stat


def spark_form(df: Any, limit: int | None) -> pd.DataFrame | None:
    """The checked pandas form of a captured Spark result (runs its evidence job once)."""
    with _lock:
        hit = _recipes.get(id(df))
    if hit is None or hit[0]() is not df or _CAPTURE is None:
        return None
    return _CAPTURE.materialise(hit[1], limit)


class SparkCapture:
    """Installs and removes the PySpark wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, Any]] = []
        self._groups: dict[int, tuple[Any, tuple[Any, list[str]]]] = {}
        self.installed = False

    def install(self) -> None:
        global _CAPTURE
        if self.installed:
            return
        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.group import GroupedData

        for name in ("groupBy", "groupby"):
            self._patch(DataFrame, name, self._group_by(getattr(DataFrame, name)))
        for name in ("agg", "count", "sum", "avg", "mean", "min", "max"):
            self._patch(GroupedData, name, self._aggregate(getattr(GroupedData, name), name))
        self._patch(DataFrame, "toPandas", self._to_pandas(DataFrame.toPandas))
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

    # ------------------------------------------------------------ wrappers
    def _group_by(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def group_by(df: Any, *cols: Any) -> Any:
            gd = original(df, *cols)
            keys = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)
            if keys and all(isinstance(k, str) for k in keys):
                _keep(self._groups, gd, (df, keys))
            return gd

        return group_by

    def _aggregate(self, original: Callable, name: str) -> Callable:
        @functools.wraps(original)
        def aggregate(gd: Any, *args: Any) -> Any:
            result = original(gd, *args)
            try:
                hit = self._groups.get(id(gd))
                if hit is not None and hit[0]() is gd:
                    self._record(hit[1][0], hit[1][1], name, args, result)
            except Exception as exc:  # never break user code: shown without evidence
                self.registry.failures.append(f"spark: {type(exc).__name__}: {exc}")
            return result

        return aggregate

    def _to_pandas(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def to_pandas(df: Any) -> Any:
            with _lock:
                hit = _recipes.get(id(df))
            if hit is None or hit[0]() is not df:
                return original(df)
            recipe = hit[1]
            try:
                full = self._run(recipe, None, original)
                user = full[[c for c in full.columns if not str(c).startswith(contract.PREFIX)]]
                self._register(recipe, full, user)
                return user
            except Exception as exc:
                self.registry.failures.append(f"spark toPandas: {type(exc).__name__}: {exc}")
                return original(df)

        return to_pandas

    # ------------------------------------------------------------ recording
    def _record(self, source: Any, keys: list[str], name: str, args: tuple, result: Any) -> None:
        from pyspark.sql import functions as F

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
        out_names = [c for c in result.columns if c not in keys]
        if len(out_names) != len(exprs):
            return
        measures = {out: _stat(e, out) for out, e in zip(out_names, exprs, strict=True)}
        if name == "count":
            measures = {"count": (None, "size")}
        with _lock:
            _keep(_recipes, result, Recipe(source, keys, exprs, measures))

    def _facts(self, recipe: Recipe, unit: str | None, k: int) -> tuple[list[Any], list[str], set[str]]:
        from pyspark.sql import functions as F

        schema = dict(recipe.source.dtypes)
        variables = sorted({v for v, s in recipe.measures.values() if v in schema and s != "size"})
        numeric = {"int", "bigint", "smallint", "tinyint", "double", "float", "boolean"}
        magnitudes = {v for v, s in recipe.measures.values()
                      if v in variables and s in contract.MAGNITUDE_EVIDENCE
                      and (schema[v] in numeric or schema[v].startswith("decimal"))}
        p = contract.PREFIX
        exprs = [F.count(F.lit(1)).alias(f"{p}rows")]
        if unit is not None:
            exprs.append(F.countDistinct(F.col(unit)).alias(f"{p}units"))
        for i, v in enumerate(variables):
            names = contract.fact_names(i)
            col = F.col(v)
            exprs.append(F.count(col).alias(names["n"]) if unit is None else
                         F.countDistinct(F.when(col.isNotNull(), F.col(unit))).alias(names["n"]))
            if v in magnitudes and unit is None:
                x = col.cast("double")
                # top-2 by two hash aggregations (max now, the runner-up in a second job):
                # max_by(.., k) needs a sort-based aggregation, several times slower in Spark
                top = F.max(F.abs(x)).alias(f"{p}m_{i}") if k == 2 else \
                    F.max_by(F.abs(x), F.abs(x), k).alias(names["top"])
                exprs += [F.sum(x).alias(names["t"]), F.sum(F.abs(x)).alias(names["ta"]),
                          F.max(x < 0).alias(names["neg"]), top]
        return exprs, variables, magnitudes

    def _run(self, recipe: Recipe, limit: int | None, to_pandas: Callable | None = None) -> pd.DataFrame:
        rules = self.rules()
        unit = rules.unit if rules.unit in dict(recipe.source.dtypes) else None
        exprs, variables, magnitudes = self._facts(recipe, unit, rules.top_k)
        job = recipe.source.groupBy(*recipe.keys).agg(*recipe.exprs, *exprs)
        if limit is not None:
            job = job.limit(limit)
        fetch = to_pandas or self._original_to_pandas()
        full = fetch(job)
        if unit is not None and magnitudes:
            full = full.merge(self._unit_magnitudes(recipe, unit, variables, magnitudes, rules.top_k, fetch),
                              on=recipe.keys, how="left")
        elif magnitudes and rules.top_k == 2:
            full = self._runner_up(recipe, full, variables, magnitudes, fetch)
        recipe.unit = unit  # type: ignore[attr-defined]
        recipe.variables = variables  # type: ignore[attr-defined]
        return full

    def _runner_up(self, recipe: Recipe, full: pd.DataFrame, variables: list[str], magnitudes: set[str],
                   fetch: Callable) -> pd.DataFrame:
        """The second largest contribution per group: the groups' maxima (one row per group,
        broadcast) joined back to the source, one hash aggregation."""
        from pyspark.sql import functions as F

        p = contract.PREFIX
        wanted = [(i, v) for i, v in enumerate(variables) if v in magnitudes]
        small = full[recipe.keys + [f"{p}m_{i}" for i, _ in wanted]].copy()
        small.columns = [f"{p}k{j}" for j in range(len(recipe.keys))] + [f"{p}m_{i}" for i, _ in wanted]
        maxima = recipe.source.sparkSession.createDataFrame(small)
        cond = [recipe.source[key].eqNullSafe(maxima[f"{p}k{j}"]) for j, key in enumerate(recipe.keys)]
        joined = recipe.source.join(F.broadcast(maxima), cond, "inner")
        aggs = []
        for i, v in wanted:
            x, m = F.abs(F.col(v).cast("double")), F.col(f"{p}m_{i}")
            aggs += [F.max(F.when(x < m, x)).alias(f"{p}second_{i}"),
                     F.sum(F.when(x == m, 1).otherwise(0)).alias(f"{p}ties_{i}")]
        second = fetch(joined.groupBy(*[recipe.source[key] for key in recipe.keys]).agg(*aggs))
        full = full.merge(second, on=recipe.keys, how="left")
        for i, _ in wanted:
            top1 = full[f"{p}m_{i}"].to_numpy(dtype=float, na_value=float("nan"))
            runner = full[f"{p}second_{i}"].to_numpy(dtype=float, na_value=float("nan"))
            ties = full[f"{p}ties_{i}"].fillna(0).to_numpy(dtype=float)
            top2 = [a if t >= 2 else b for a, b, t in zip(top1, runner, ties, strict=True)]
            full[contract.fact_names(i)["top"]] = [[a, b] for a, b in zip(top1, top2, strict=True)]
        return full

    def _unit_magnitudes(self, recipe: Recipe, unit: str, variables: list[str], magnitudes: set[str], k: int,
                         fetch: Callable) -> pd.DataFrame:
        from pyspark.sql import functions as F

        p = contract.PREFIX
        inner = [F.sum(F.col(v).cast("double")).alias(f"{p}s{i}") for i, v in enumerate(variables) if v in magnitudes]
        per_unit = recipe.source.groupBy(*recipe.keys, unit).agg(*inner)
        outer = []
        for i, v in enumerate(variables):
            if v not in magnitudes:
                continue
            names = contract.fact_names(i)
            x = F.col(f"{p}s{i}")
            outer += [F.sum(x).alias(names["t"]), F.sum(F.abs(x)).alias(names["ta"]),
                      F.max(x < 0).alias(names["neg"]), F.max_by(F.abs(x), F.abs(x), k).alias(names["top"])]
        return fetch(per_unit.groupBy(*recipe.keys).agg(*outer))

    def _original_to_pandas(self) -> Callable:
        for _owner, name, _had, original in self._saved:
            if name == "toPandas":
                return original
        return lambda df: df.toPandas()

    def materialise(self, recipe: Recipe, limit: int | None) -> pd.DataFrame:
        with recipe.lock:
            if recipe.form is not None:
                return recipe.form
            full = self._run(recipe, limit)
            user = full[[c for c in full.columns if not str(c).startswith(contract.PREFIX)]]
            self._register(recipe, full, user)
            return recipe.form

    def _register(self, recipe: Recipe, full: pd.DataFrame, user: pd.DataFrame) -> None:
        rules = self.rules()
        notes: list[str] = []
        if rules.unit is not None and getattr(recipe, "unit", None) is None:
            notes.append(f"unit column {rules.unit!r} not found for this table: rows counted as units")
        ge = contract.group_evidence_from_facts(full, recipe.keys, recipe.variables, rules.top_k,
                                                recipe.unit)
        shown = contract.keyed(user.copy(), recipe.keys)
        measures = recipe.measures
        contract.register(self.registry, rules, "spark groupBy.agg", shown, ge, recipe.keys,
                          lambda m: measures.get(m, (None, "custom")), notes)
        if recipe.form is None:
            recipe.form = shown


def _keep(store: dict, obj: Any, value: Any) -> None:
    key = id(obj)

    def drop(_r: Any) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            store.pop(key, None)

    try:
        ref = weakref.ref(obj, drop)
    except TypeError:
        return
    if len(store) > 1024:
        store.clear()
    store[key] = (ref, value)
