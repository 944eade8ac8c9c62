"""Evidence capture for polars: group_by(...).agg / len / sum / ..., pivot, value_counts.

Each wrapped call returns polars' own result, untouched. On the side, the facts the
rules need are computed *by polars* with one extra aggregation over the same grouping
(rows, distinct units, per variable: units with a value, total, absolute total, negative
contributions, the k largest contributions per unit with ``top_k``), and only that small
table is converted to Python. Counts need no extra pass at all when no unit column is
declared: the count a user asked for is the number of rows in the cell.

Covered: ``DataFrame.group_by(...)`` then ``agg`` (and ``len``, ``count``, ``sum``, ``mean``,
``median``, ``min``, ``max``, ``n_unique``, ``first``, ``last``, ``quantile``, which polars
routes through ``agg``); ``LazyFrame.group_by(...).agg(...)`` (or ``.len()``) followed
directly by ``collect()``; ``DataFrame.pivot``; ``Series.value_counts``. Anything else
(e.g. a lazy plan sorted after the aggregation) is displayed as an engine object without
evidence: row-level when it has text columns, unverified otherwise (fail closed).
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import contract

_NAME = re.compile(r'^col\("((?:[^"\\]|\\.)*)"\)\.(\w+)\((.*)\)$')
_WRAPPERS = re.compile(r'\.(?:alias\("(?:[^"\\]|\\.)*"\)|round\([^()]*\)|name\.\w+\([^()]*\)|(?:strict_)?cast\([^()]*\))')


class _Depth(threading.local):
    value = 0


_depth = _Depth()


def expression_stat(expr: Any) -> tuple[str | None, str]:
    """(variable, statistic) of one aggregation expression ("custom" when we cannot tell)."""
    text = _WRAPPERS.sub("", str(expr))
    if text == "len()":
        return None, "size"
    m = _NAME.match(text)
    roots = _roots(expr)
    if m is None:
        return (roots[0] if len(roots) == 1 else None), "custom"
    var, method, arg = m.group(1), m.group(2), m.group(3)
    if method == "quantile":
        from .pandas import quantile_stat

        q = re.search(r"([0-9.]+)\]?$", arg)
        return var, quantile_stat(float(q.group(1))) if q else "custom"
    return var, contract.ENGINE_STATS.get(method, "custom")


def _roots(expr: Any) -> list[str]:
    try:
        return list(expr.meta.root_names())
    except Exception:
        return []


def _output_name(expr: Any) -> str | None:
    try:
        if expr.meta.has_multiple_outputs():
            return None
        return expr.meta.output_name()
    except Exception:
        return None


def measures(aggs: tuple, named: dict[str, Any]) -> tuple[dict[str, tuple[str | None, str]], str | None]:
    """Output column → (variable, statistic), and the statistic of multi-output expressions."""
    import polars as pl

    out: dict[str, tuple[str | None, str]] = {}
    multi: set[str] = set()
    flat: list[Any] = []
    for a in aggs:
        flat.extend(a if isinstance(a, list | tuple) else [a])
    for a in flat:
        expr = pl.col(a) if isinstance(a, str) else a
        if not isinstance(expr, pl.Expr):
            multi.add("custom")
            continue
        name = _output_name(expr)
        if name is None:
            multi.add(_multi_stat(expr))
            continue
        out[name] = expression_stat(expr) if isinstance(a, pl.Expr) else (a, "custom")
    for name, a in named.items():
        expr = pl.col(a) if isinstance(a, str) else a
        out[str(name)] = expression_stat(expr) if isinstance(expr, pl.Expr) else (None, "custom")
    return out, (multi.pop() if len(multi) == 1 else ("custom" if multi else None))


def _multi_stat(expr: Any) -> str:
    text = _WRAPPERS.sub("", str(expr))
    m = re.search(r"\.(\w+)\(\)$", text)
    return contract.ENGINE_STATS.get(m.group(1), "custom") if m else "custom"


def _flatten_by(by: tuple) -> list[Any]:
    out: list[Any] = []
    for b in by:
        out.extend(b if isinstance(b, list | tuple) else [b])
    return out


class PolarsCapture:
    """Installs and removes the polars wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, Any]] = []
        self._lazy: dict[int, tuple[Any, Any]] = {}  # id(lazy result) -> (weakref, recipe)
        self._lazy_groups: dict[int, tuple[Any, Any]] = {}  # id(LazyGroupBy) -> (weakref, (lf, by, named))
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        import polars as pl
        from polars.dataframe.group_by import GroupBy
        from polars.lazyframe.group_by import LazyGroupBy

        self._patch(GroupBy, "agg", self._eager_agg)
        self._patch(pl.DataFrame, "pivot", self._pivot)
        self._patch(pl.Series, "value_counts", self._value_counts)
        self._patch(pl.LazyFrame, "group_by", self._lazy_group_by)
        self._patch(LazyGroupBy, "agg", self._lazy_agg)
        self._patch(LazyGroupBy, "len", self._lazy_len)
        self._patch(pl.LazyFrame, "collect", self._collect)
        for owner in (pl.DataFrame, pl.LazyFrame, pl.Series):
            self._patch(owner, "describe", self._describe)
        self.installed = True

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self._lazy.clear()
        self._lazy_groups.clear()
        self.installed = False

    def _patch(self, owner: type, name: str, make: Callable[[Any], Callable]) -> None:
        original = owner.__dict__[name]
        wrapper = functools.wraps(original)(make(original))
        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        self._saved.append((owner, name, original))
        setattr(owner, name, wrapper)

    def _guarded(self, call: Callable[[], Any], record: Callable[[Any], None]) -> Any:
        if _depth.value:
            return call()
        _depth.value += 1
        try:
            result = call()
        finally:
            _depth.value -= 1
        _depth.value += 1
        try:
            record(result)
        except Exception as exc:  # never break user code; the table will show without evidence
            self.registry.failures.append(f"polars: {type(exc).__name__}: {exc}")
        finally:
            _depth.value -= 1
        return result

    # ------------------------------------------------------------ wrappers
    def _eager_agg(self, original: Callable) -> Callable:
        def agg(gb: Any, *aggs: Any, **named: Any) -> Any:
            if not _depth.value:
                combined = self._combined(gb, aggs, named, original)
                if combined is not None:
                    return combined
            return self._guarded(lambda: original(gb, *aggs, **named),
                                 lambda result: self._record_group_by(gb.df, _flatten_by(gb.by), gb.named_by,
                                                                      aggs, named, result, "group_by.agg"))
        return agg

    def _combined(self, gb: Any, aggs: tuple, named: dict, original: Callable) -> Any:
        """Magnitudes without a unit column: the facts ride along in the user's own aggregation.

        One group_by computes the user's columns and the facts; the user gets exactly the
        columns they asked for (in their order), the facts stay here. None: not applicable
        (or the combined call failed), and the caller runs the ordinary path.
        """
        try:
            rules = self.rules()
            if rules.unit is not None:
                return None
            out, multi = measures(aggs, named)
            schema = gb.df.schema
            if multi is not None or not out or all(s in ("size", "count") for _, s in out.values()):
                return None
            variables = sorted({v for v, st in out.values() if v is not None and v in schema and st != "size"})
            magnitudes = {v for v, st in out.values() if v in variables and st in contract.MAGNITUDE_EVIDENCE
                          and _numeric(schema[v])}
            exprs = _fact_exprs(variables, magnitudes, rules.top_k, indicator_levels(gb.df.lazy(), magnitudes))
        except Exception:
            return None
        _depth.value += 1
        try:
            full = original(gb, *aggs, *exprs, **named)
        except Exception:
            return None
        finally:
            _depth.value -= 1
        result = full.select([c for c in full.columns if not c.startswith(contract.PREFIX)])
        try:
            keys = [c for c in result.columns if c not in out]
            facts = full.select(keys + [c for c in full.columns if c.startswith(contract.PREFIX)]).to_pandas()
            notes: list[str] = []
            ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, None)
            set_indicators(facts, ge, variables)
            rows = _linking_rows(gb.df.lazy(), _flatten_by(gb.by), gb.named_by, keys, out,
                                 int(facts[f"{contract.PREFIX}rows"].sum()))
            contract.register(self.registry, rules, "polars group_by.agg", contract.keyed(result.to_pandas(), keys),
                              ge, keys, lambda m: out.get(m, (None, "custom")), notes, engine_object=result,
                              rows=rows)
        except Exception as exc:  # the user's result stands; it is shown without evidence
            self.registry.failures.append(f"polars: {type(exc).__name__}: {exc}")
        return result

    def _lazy_group_by(self, original: Callable) -> Callable:
        def group_by(lf: Any, *by: Any, **kwargs: Any) -> Any:
            lgb = original(lf, *by, **kwargs)
            if not _depth.value:
                named = {k: v for k, v in kwargs.items() if k != "maintain_order"}
                self._keep(self._lazy_groups, lgb, (lf, _flatten_by(by), named))
            return lgb
        return group_by

    def _lazy_agg(self, original: Callable) -> Callable:
        def agg(lgb: Any, *aggs: Any, **named: Any) -> Any:
            result = original(lgb, *aggs, **named)
            if not _depth.value:
                hit = self._lazy_groups.get(id(lgb))
                if hit is not None and hit[0]() is lgb:
                    self._keep(self._lazy, result, (*hit[1], aggs, named))
            return result
        return agg

    def _lazy_len(self, original: Callable) -> Callable:
        def length(lgb: Any, name: str | None = None) -> Any:
            import polars as pl

            result = original(lgb, name)
            if not _depth.value:
                hit = self._lazy_groups.get(id(lgb))
                if hit is not None and hit[0]() is lgb:
                    self._keep(self._lazy, result, (*hit[1], (pl.len().alias(name or "len"),), {}))
            return result
        return length

    def _collect(self, original: Callable) -> Callable:
        def collect(lf: Any, *args: Any, **kwargs: Any) -> Any:
            hit = self._lazy.get(id(lf))
            if hit is None or hit[0]() is not lf or _depth.value:
                return original(lf, *args, **kwargs)
            source, by, named_by, aggs, named = hit[1]
            return self._guarded(lambda: original(lf, *args, **kwargs),
                                 lambda result: self._record_group_by(source, by, named_by, aggs, named, result,
                                                                      "group_by.agg"))
        return collect

    def _pivot(self, original: Callable) -> Callable:
        def pivot(df: Any, on: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(df, on, *args, **kwargs),
                                 lambda result: self._record_pivot(df, on, kwargs, result))
        return pivot

    def _value_counts(self, original: Callable) -> Callable:
        def value_counts(s: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(s, *args, **kwargs),
                                 lambda result: self._record_value_counts(s, kwargs, result))
        return value_counts

    def _describe(self, original: Callable) -> Callable:
        """``describe`` of a DataFrame, LazyFrame (eager result) or Series: evidence per column.

        DataFrame.describe runs LazyFrame.describe and Series.describe runs DataFrame.describe:
        only the outermost call records (depth guard), on the object the user sees.
        """
        def describe(obj: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(obj, *args, **kwargs),
                                 lambda result: self._record_describe(obj, result))
        return describe

    def _keep(self, store: dict, obj: Any, value: Any) -> None:
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda _r: store.pop(key, None))
        except TypeError:
            return
        if len(store) > 1024:
            store.clear()
        store[key] = (ref, value)

    # ------------------------------------------------------------ recording
    def _record_group_by(self, frame: Any, by: list[Any], named_by: dict, aggs: tuple, named: dict,
                         result: Any, call: str) -> None:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        lf = frame.lazy()
        keys = lf.group_by(*by, **named_by).agg([]).collect_schema().names()
        out, multi = measures(aggs, named)
        schema = lf.collect_schema()

        def measure_of(measure: str) -> tuple[str | None, str]:
            if measure in out:
                return out[measure]
            if multi is not None and measure in schema:
                return measure, multi
            return None, "custom"

        present = [c for c in result.columns if c not in keys]
        resolved = {c: measure_of(c) for c in present}
        self._register(call, lf, by, named_by, keys, resolved, measure_of, result, schema)

    def _register(self, call: str, lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], measure_of: Callable, result: Any,
                  schema: Any, shown: pd.DataFrame | None = None, key_casts: dict[str, Any] | None = None,
                  variables: list[str] | None = None, margin_label: str | None = None, link: bool = True) -> None:
        rules = self.rules()
        notes: list[str] = []
        unit = rules.unit
        if unit is not None and unit not in schema:
            notes.append(f"unit column {unit!r} not found for this table: rows counted as units")
            unit = None
        if variables is None:
            variables = sorted({v for v, s in resolved.values() if v is not None and v in schema and s != "size"})
        magnitudes = {v for v, s in resolved.values() if v in variables and s in contract.MAGNITUDE_EVIDENCE
                      and _numeric(schema[v])}
        if shown is None:
            shown = contract.keyed(result.to_pandas(), keys)
        counts_only = all(s in ("size", "count") for _, s in resolved.values())
        sizes = [c for c, (_, s) in resolved.items() if s == "size"]
        if unit is None and counts_only and (sizes or not resolved) and not key_casts:
            facts = _facts_from_result(result, keys, resolved, variables, sizes)
        else:
            facts = _facts(lf, by, named_by, keys, variables, magnitudes, unit, rules.top_k, key_casts,
                           indicator_levels(lf, magnitudes))
        ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, unit)
        set_indicators(facts, ge, variables)
        rows = None
        if link:
            rows = _linking_rows(lf, by, named_by, keys, resolved, int(ge.rows.sum()) if ge.rows is not None else 0)
        contract.register(self.registry, rules, f"polars {call}", shown, ge, keys, measure_of, notes,
                          engine_object=result, margin_label=margin_label, rows=rows)

    def _record_pivot(self, df: Any, on: Any, kwargs: dict, result: Any) -> None:
        import polars as pl

        index = kwargs.get("index")
        values = kwargs.get("values")
        on_cols = [on] if isinstance(on, str) else list(on) if isinstance(on, list | tuple) else None
        index = [index] if isinstance(index, str) else list(index) if isinstance(index, list | tuple) else None
        if on_cols is None or len(on_cols) != 1 or index is None or not all(isinstance(c, str) for c in index):
            return  # selectors or several 'on' columns: shown without evidence
        if isinstance(values, list | tuple):
            if len(values) != 1:
                return
            values = values[0]
        if values is None:
            rest = [c for c in df.columns if c not in index and c not in on_cols]
            if len(rest) != 1:
                return
            values = rest[0]
        if not isinstance(values, str):
            return
        agg = kwargs.get("aggregate_function")
        stat = "first" if agg is None else (contract.ENGINE_STATS.get(agg, "custom") if isinstance(agg, str)
                                           else expression_stat(agg)[1])
        var = None if stat == "size" else values
        on_col = on_cols[0]
        shown = result.to_pandas().set_index(index)
        shown.columns = pd.Index([str(c) for c in shown.columns], name=on_col)
        keys = [*index, on_col]
        schema = df.collect_schema() if hasattr(df, "collect_schema") else df.schema
        self._register("pivot", df.lazy(), [*index, pl.col(on_col).cast(pl.String)], {}, keys,
                       {"": (var, stat)}, lambda m: (var, stat), result, schema, shown=shown,
                       key_casts={on_col: pl.String})

    def _record_describe(self, obj: Any, result: Any) -> None:
        """Evidence of ``describe``: one group (the whole frame), per column its units, its
        magnitudes (mean, std are magnitude statistics), and its missing values (a
        ``null_count`` is a count of the units lacking the value: a pseudo-variable)."""
        import polars as pl

        if not isinstance(result, pl.DataFrame) or "statistic" not in result.columns:
            return
        if isinstance(obj, pl.Series):
            name = obj.name
            frame = obj.to_frame(name).lazy()
            columns = [name]
        else:
            frame = obj.lazy()
            columns = [c for c in result.columns if c != "statistic"]
        schema = frame.collect_schema()
        if not all(c in schema for c in columns):
            return
        nulls = {c: f"{contract.PREFIX}null_{c}" for c in columns}
        lf = frame.with_columns([pl.when(pl.col(c).is_null()).then(pl.lit(1)).alias(n) for c, n in nulls.items()])
        variables = {c: c for c in columns}
        single = columns[0] if isinstance(obj, pl.Series) else None

        def measure_of(measure: str) -> tuple[str | None, str]:
            from .pandas import DESCRIBE_STATS, stat_name

            parts = measure.split("|") if measure else []
            if single is not None:  # a Series' describe: its one value column is "value"
                parts = [q for q in parts if q != "value"] or parts
            var = next((variables[q] for q in parts if q in variables), single)
            rest = [q for q in parts if q not in variables or variables[q] != var] if var else parts
            if len(rest) != 1 or var is None:
                return var, "custom"
            stat = rest[0]
            if stat == "null_count":
                return nulls[var], "count"
            return var, DESCRIBE_STATS.get(stat, stat_name(stat))

        shown = result.to_pandas().set_index("statistic")
        shown.index.name = None
        resolved = {f"{st}|{c}": measure_of(f"{st}|{c}") for c in columns for st in ("count", "mean")}
        full_schema = lf.collect_schema()
        self._register("describe", lf, [], {}, [], resolved, measure_of, result, full_schema, shown=shown,
                       variables=[*columns, *nulls.values()], link=False)

    def _record_value_counts(self, s: Any, kwargs: dict, result: Any) -> None:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        name = s.name or ""
        frame = s.to_frame(name)
        count_col = [c for c in result.columns if c != name]
        stat = "proportion" if kwargs.get("normalize") else "count"
        resolved = {c: (None, stat) for c in count_col}
        self._register("Series.value_counts", frame.lazy(), [name], {}, [name], resolved,
                       lambda m: (None, stat), result, frame.schema)


def _numeric(dtype: Any) -> bool:
    try:
        return bool(dtype.is_numeric()) or str(dtype) == "Boolean"
    except Exception:
        return False


def _facts_from_result(result: Any, keys: list[str], resolved: dict, variables: list[str],
                       sizes: list[str]) -> pd.DataFrame:
    """Counts without a unit column: the counts asked for are the facts (no second pass)."""
    cols = [*keys]
    frame = result.select(keys + [c for c in resolved if c in result.columns]).to_pandas()
    out = frame[cols].copy()
    if sizes:
        out[f"{contract.PREFIX}rows"] = frame[sizes[0]].to_numpy()
    for i, v in enumerate(variables):
        col = next((c for c, (var, s) in resolved.items() if var == v and s == "count"), None)
        if col is not None:
            out[contract.fact_names(i)["n"]] = frame[col].to_numpy()
    if not sizes:
        n_cols = [c for c in out.columns if c.startswith(f"{contract.PREFIX}n_")]
        out[f"{contract.PREFIX}rows"] = out[n_cols].max(axis=1) if n_cols else 0
    return out


def indicator_levels(lf: Any, magnitudes: set[str]) -> dict[str, float]:
    """The attribute level of each magnitude variable that is an indicator (only 0/1, or two
    values, as :func:`sdc_magic.evidence.indicator_level`), by one pass over those columns:
    per group only the units at that level are then counted, for indicators only."""
    import polars as pl

    if not magnitudes:
        return {}
    cols = sorted(magnitudes)
    exprs = []
    for j, v in enumerate(cols):
        x = pl.col(v).cast(pl.Float64)
        exprs += [x.min().alias(f"lo{j}"), x.max().alias(f"hi{j}"),
                  ((x != x.min()) & (x != x.max())).any().alias(f"other{j}")]
    row = lf.select(exprs).collect().row(0, named=True)
    out: dict[str, float] = {}
    for j, v in enumerate(cols):
        lo, hi, other = row[f"lo{j}"], row[f"hi{j}"], row[f"other{j}"]
        if lo is None or hi is None or other or lo != lo or hi != hi:
            continue
        if lo >= 0.0 and hi <= 1.0 and {lo, hi} <= {0.0, 1.0}:
            out[v] = 1.0
        elif lo != hi:
            out[v] = float(hi)
    return out


def _fact_exprs(variables: list[str], magnitudes: set[str], k: int, levels: dict[str, float] | None = None
                ) -> list[Any]:
    """The facts of each group as polars expressions (no unit column)."""
    import polars as pl

    p = contract.PREFIX
    exprs = [pl.len().alias(f"{p}rows")]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        exprs.append(pl.col(v).count().alias(names["n"]))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            exprs += [x.sum().alias(names["t"]), x.abs().sum().alias(names["ta"]),
                      (x < 0).any().alias(names["neg"]), x.abs().drop_nulls().top_k(k).alias(names["top"])]
            if levels and v in levels:  # an indicator: its sum is a count of the rows at the level
                exprs.append((x == levels[v]).sum().alias(f"{p}ones_{i}"))
    return exprs


def _grouped(lf: Any, by: list[Any], named_by: dict, exprs: list[Any]) -> Any:
    """``lf.group_by(by).agg(exprs)``; without keys, one group (a constant key, dropped after)."""
    import polars as pl

    if by or named_by:
        return lf.group_by(*by, **named_by).agg(exprs)
    key = f"{contract.PREFIX}all"
    return lf.group_by(pl.lit(0).alias(key)).agg(exprs).drop(key)


def _facts(lf: Any, by: list[Any], named_by: dict, keys: list[str], variables: list[str], magnitudes: set[str],
           unit: str | None, k: int, key_casts: dict[str, Any] | None = None,
           levels: dict[str, float] | None = None) -> pd.DataFrame:
    """One extra aggregation in polars; only the per-group facts come back.

    With a unit column, one pre-aggregation to (keys, unit) — rows and per variable its
    count, sum, min and max — then the facts per group from that much smaller table.
    """
    import polars as pl

    p = contract.PREFIX
    if unit is None:
        return _grouped(lf, by, named_by, _fact_exprs(variables, magnitudes, k, levels)).collect().to_pandas()
    if not magnitudes:
        # counts only: distinct units by a hash distinct per group (about 2x cheaper than a
        # pre-aggregation to (keys, unit) when nearly every pair is distinct); a variable
        # without missing values has every unit of its group
        nulls = lf.select([pl.col(v).null_count() for v in variables]).collect().row(0) if variables else ()
        exprs = [pl.len().alias(f"{p}rows"), pl.col(unit).n_unique().alias(f"{p}units")]
        for i, (v, missing) in enumerate(zip(variables, nulls, strict=True)):
            u = pl.col(unit).n_unique() if not missing else pl.col(unit).filter(pl.col(v).is_not_null()).n_unique()
            exprs.append(u.alias(contract.fact_names(i)["n"]))
        return _grouped(lf, by, named_by, exprs).collect().to_pandas()
    inner = [pl.len().alias(f"{p}r")]
    for i, v in enumerate(variables):
        inner.append(pl.col(v).count().alias(f"{p}c{i}"))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            inner.append(x.sum().alias(f"{p}s{i}"))
            if levels and v in levels:  # a unit has the attribute if one of its rows has it
                inner.append((x == levels[v]).any().alias(f"{p}a{i}"))
    per_unit = _grouped(lf, [*by, pl.col(unit).alias(f"{p}u")], named_by, inner)
    outer = [pl.col(f"{p}r").sum().alias(f"{p}rows"), pl.len().alias(f"{p}units")]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        outer.append((pl.col(f"{p}c{i}") > 0).sum().alias(names["n"]))
        if v in magnitudes:
            x = pl.when(pl.col(f"{p}c{i}") > 0).then(pl.col(f"{p}s{i}"))
            outer += [x.sum().alias(names["t"]), x.abs().sum().alias(names["ta"]),
                      (x < 0).any().alias(names["neg"]), x.abs().drop_nulls().top_k(k).alias(names["top"])]
            if levels and v in levels:
                outer.append(pl.col(f"{p}a{i}").fill_null(False).sum().alias(f"{p}ones_{i}"))
    return _grouped(per_unit, keys, {}, outer).collect().to_pandas()


def set_indicators(facts: pd.DataFrame, ge: Any, variables: list[str]) -> None:
    """Mark indicator variables (only 0/1, or two values, over the whole aggregation) with the
    units having the attribute per group (``VarEvidence.ones``), as the pandas path does
    (:func:`sdc_magic.evidence.indicator_level`): their sums and means are counts."""
    import numpy as np

    p = contract.PREFIX

    def num(name: str) -> np.ndarray:
        if name not in facts.columns:
            return np.zeros(len(facts))
        return pd.to_numeric(facts[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    for i, v in enumerate(variables):
        if f"{p}ones_{i}" in facts.columns and v in ge.variables:  # counted by the engine (polars)
            ge.variables[v].ones = np.nan_to_num(num(f"{p}ones_{i}")).astype(np.int64)
            continue
        if f"{p}lo_{i}" not in facts.columns or f"{p}sq_{i}" not in facts.columns or v not in ge.variables:
            continue
        lo_g, hi_g = num(f"{p}lo_{i}"), num(f"{p}hi_{i}")
        has = np.isfinite(lo_g) & np.isfinite(hi_g)
        # every row at its group's min or max <=> the sum of (x - lo)(hi - x) >= 0 terms is 0,
        # i.e. -Σx² + (lo + hi)Σx - lo·hi·n = 0; then (Σx - lo·n) / (hi - lo) rows are at hi
        n = np.nan_to_num(num(f"{p}cnt_{i}") if f"{p}cnt_{i}" in facts.columns else num(contract.fact_names(i)["n"]))
        t, sq = np.nan_to_num(num(contract.fact_names(i)["t"])), np.nan_to_num(num(f"{p}sq_{i}"))
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = np.where(has, -sq + (lo_g + hi_g) * t - lo_g * hi_g * n, 0.0)
            at_hi = np.where(has & (hi_g > lo_g), np.rint((t - lo_g * n) / (hi_g - lo_g)), n)
        if not has.any() or (np.abs(spread) > 1e-9 * np.maximum(np.abs(sq), 1.0)).any():
            continue
        lo, hi = float(lo_g[has].min()), float(hi_g[has].max())
        if not (np.isin(lo_g[has], [lo, hi]).all() and np.isin(hi_g[has], [lo, hi]).all()):
            continue
        if lo >= 0.0 and hi <= 1.0 and {lo, hi} <= {0.0, 1.0}:
            level = 1.0
        elif lo != hi:
            level = hi
        else:
            continue
        # units at the attribute: counted per unit in a unit path, else the rows at the maximum
        chi = np.nan_to_num(num(f"{p}chi_{i}")).astype(np.int64) if f"{p}chi_{i}" in facts.columns \
            else at_hi.astype(np.int64)
        ge.variables[v].ones = np.where(has & (hi_g == level), chi, 0).astype(np.int64)


#: Up to this many source rows linking reads the values themselves (see _linking_rows).
RAW_LINKED_ROWS = 1_000_000


def _linking_rows(lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], n_rows: int) -> pd.DataFrame | None:
    """The rows behind a table for linking (:func:`contract.register`'s ``rows``), or None.

    One row per source row that reached the aggregation: the grouping keys as the table
    shows them, and per other column a 64-bit hash computed by polars (the values never
    leave polars). Skipped above ``linking.MAX_LINKED_ROWS`` rows (linking is not
    attempted there for pandas either) and if anything fails: the table is then checked
    on its own. A table of one variable's statistics covers the rows where it is known.
    """
    import polars as pl

    from ..linking import MAX_HASHED_COLUMNS, MAX_LINKED_ROWS

    if n_rows <= 0 or n_rows > MAX_LINKED_ROWS:
        return None
    try:
        schema = lf.collect_schema()
        key_exprs = [pl.col(b) if isinstance(b, str) else b for b in by]
        key_exprs += [(pl.col(e) if isinstance(e, str) else e).alias(str(n)) for n, e in named_by.items()]
        # linking reads the first MAX_HASHED_COLUMNS columns: hash no more than it reads
        room = max(MAX_HASHED_COLUMNS - len(keys), 1)
        names = [c for c in schema.names() if c not in keys and not c.startswith(contract.PREFIX)][:room]
        if n_rows <= RAW_LINKED_ROWS:
            # the values (in-process): fingerprinted like pandas rows, so pandas, polars and
            # DuckDB tables of the same people are compared (red team: a polars count, then
            # a DuckDB count without district C, gave C's 2 and 1)
            hashes = [pl.col(c) for c in names]
        else:
            hashes = [pl.col(c).hash(seed=0).alias(f"polars#{c}") for c in names]
        stats = {st for _, st in resolved.values()}
        variables = {v for v, _ in resolved.values() if v is not None}
        query = lf
        if "size" not in stats and len(variables) == 1 and next(iter(variables)) in schema:
            query = query.filter(pl.col(next(iter(variables))).is_not_null())
        rows = query.select([*key_exprs, *hashes]).collect().to_pandas()
        return rows if len(rows) <= MAX_LINKED_ROWS else None
    except Exception:
        return None
