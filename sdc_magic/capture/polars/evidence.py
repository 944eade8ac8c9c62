"""The evidence of a polars aggregation, computed inside polars: the facts per group and the
rows behind a table for linking.

Separate from planning (:mod:`.plan`: what an expression reveals, nothing run) and from the
wrappers (:mod:`sdc_magic.capture.polars`: when to record) because these are the queries
that run over the user's data: one extra aggregation (or a pre-aggregation per unit) whose
small per-group table is all that comes back to Python, and the fingerprinted source rows.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from .. import contract, runner_up


def inner_cell_values(values: Any, keys: list[str], result: Any, inner: dict[str, Any],
                      shown: pd.DataFrame) -> tuple[Any, Any]:
    """Per cell of ``shown`` (flattened): whether it is wrapped, and its inner aggregate's value.

    The protection model adds cells up (a margin is the sum of its cells): ``len() * 2 + 1``
    is not additive, its inner count is. The displayed values stay as they are (matching a
    derived frame by values uses them); only what the rules and the protection see changes.
    Any failure raises: the capture then fails and the table is checked as unverified.
    """
    import polars as pl

    from ...evidence.flatten import flatten, numeric

    rest = result.drop(list(inner))
    if keys:
        idx = f"{contract.PREFIX}pos"
        joined = rest.with_row_index(idx).join(values, on=keys, how="left", nulls_equal=True).sort(idx).drop(idx)
    else:
        if values.height != 1 or result.height != 1:
            raise ValueError("a wrapped aggregate without keys gave more than one row")
        joined = pl.concat([rest, values], how="horizontal")
    joined = joined.select(result.columns)
    inner_shown = contract.keyed(joined.to_pandas(), keys) if keys else joined.to_pandas()
    inner_shown = inner_shown[list(shown.columns)]  # a select may have kept some columns, in its order
    inner_shown.index = shown.index
    inner_shown.columns = shown.columns
    flat, flat_inner = flatten(shown), flatten(inner_shown)
    if len(flat_inner) != len(flat) or not np.array_equal(flat_inner.measure.astype(str), flat.measure.astype(str)):
        raise ValueError("the inner aggregates do not line up with the table")
    parts = [set(str(m).split("|")) for m in flat.measure]
    mask = np.array([bool(p & set(inner)) for p in parts], dtype=bool)
    inner_values = numeric(flat_inner.values)
    if inner_values is None:
        raise ValueError("the inner aggregates are not numbers")
    return mask, np.asarray(inner_values, dtype=float)


def facts_from_result(result: Any, keys: list[str], resolved: dict, variables: list[str],
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


def indicator_levels(lf: Any, magnitudes: set[str]) -> dict[str, tuple[float, float]]:
    """The attribute level of each magnitude variable that is an indicator (only 0/1, or two
    values, as :func:`sdc_magic.evidence.facts.indicator_values`) and its other value, by one
    pass over those columns:
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
    out: dict[str, tuple[float, float]] = {}
    for j, v in enumerate(cols):
        lo, hi, other = row[f"lo{j}"], row[f"hi{j}"], row[f"other{j}"]
        if lo is None or hi is None or other or lo != lo or hi != hi:
            continue
        if lo >= 0.0 and hi <= 1.0 and {lo, hi} <= {0.0, 1.0}:
            out[v] = (1.0, 0.0)
        elif lo != hi:
            out[v] = (float(hi), float(lo))
    return out


def fact_exprs(variables: list[str], magnitudes: set[str], k: int, levels: dict[str, tuple[float, float]] | None = None,
               bounded: bool = False) -> list[Any]:
    """The facts of each group as polars expressions (no unit column).

    ``bounded`` (k ≤ 2 only): the largest contribution and the sum of squares instead of a
    per-group ``top_k`` (a sort in every group: 0.6–0.9 s of 10M rows); :func:`settle_runner_up`
    then turns them into the top lists (:mod:`..runner_up`).
    """
    import polars as pl

    p = contract.PREFIX
    exprs = [pl.len().alias(f"{p}rows")]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        exprs.append(pl.col(v).count().alias(names["n"]))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            exprs += [x.sum().alias(names["t"]), x.abs().sum().alias(names["ta"]), (x < 0).any().alias(names["neg"])]
            if bounded and k <= 2:
                exprs += [x.abs().max().alias(runner_up.top1_name(i)), (x * x).sum().alias(runner_up.squares_name(i))]
            else:
                exprs += [exact_top(x, k).alias(names["top"])]
            if levels and v in levels:  # an indicator: its sum is a count of the rows at the level
                exprs.append((x == levels[v][0]).sum().alias(f"{p}ones_{i}"))
            # its known values' checksum (``contract.counted_groups``): linking inside polars takes
            # a base's first table of sums from here instead of a second scan (0.13 s of 10M rows)
            # (``when``, not ``drop_nulls``: a per-group filter took polars off its fast path, 0.7 s)
            known_value = pl.col(v).is_not_null()
            exprs.append(pl.when(known_value).then(pl.col(v).hash(seed=0)).sum()
                         .alias(f"{contract.VALUE_CHECKSUM}{i}"))
    return exprs


def exact_top(x: Any, k: int) -> Any:
    """The k largest absolute contributions of a group (a per-group sort)."""
    return x.abs().drop_nulls().top_k(k)


def settle_runner_up(facts: pd.DataFrame, lf: Any, by: list[Any], named_by: dict, keys: list[str],
                     variables: list[str], rules: Any) -> None:
    """Top lists from the bounded facts (see :func:`fact_exprs`), exact where a rule needs it.

    The groups that need their exact runner-up (:func:`..runner_up.bounds`: a cell p % or (2, k)
    dominance fails, or might) get it from one more aggregation of ``lf`` over their rows only (a
    semi-join on the keys, when the keys are columns of ``lf``; else over every group); the
    others keep the upper end of its bounds.
    """
    import polars as pl

    settled: dict[int, tuple[Any, Any, Any]] = {}
    for i, _ in enumerate(variables):
        if runner_up.top1_name(i) in facts.columns:
            x1, second, unsure = runner_up.bounds(facts, i, rules)
            settled[i] = (x1, second.copy(), unsure)
    undecided = [i for i, (_, _, unsure) in settled.items() if unsure.any()]
    if undecided:
        names = {i: contract.fact_names(i)["top"] for i in undecided}
        need = np.logical_or.reduce([settled[i][2] for i in undecided])
        rows = _rows_of_groups(lf, by, named_by, keys, facts.loc[need, keys])
        got = grouped(rows, by, named_by, [exact_top(pl.col(variables[i]).cast(pl.Float64), 2).alias(names[i])
                                           for i in undecided]).collect().to_pandas()
        aligned = facts[keys].merge(got, on=keys, how="left", validate="many_to_one") if keys else got
        if len(aligned) != len(facts):
            raise ValueError("the exact runner-up does not align with the facts")
        for i in undecided:
            x1, second, unsure = settled[i]
            lists = aligned[names[i]].to_numpy(dtype=object)
            for r in np.flatnonzero(unsure).tolist():
                if not isinstance(lists[r], list | np.ndarray | tuple):
                    raise ValueError("a group's exact runner-up is missing")
                vals = sorted((abs(float(v)) for v in lists[r]), reverse=True)  # (top_k is not sorted)
                second[r] = vals[1] if len(vals) > 1 else 0.0
    for i, (x1, second, _) in settled.items():
        runner_up.set_tops(facts, i, x1, second)


def _rows_of_groups(lf: Any, by: list[Any], named_by: dict, keys: list[str], groups: pd.DataFrame) -> Any:
    """The rows of ``lf`` in the given groups (a semi-join on the key columns, typed as ``lf``'s),
    or all of ``lf`` when the keys are not plain columns of it (expressions, renamed keys)."""
    import polars as pl

    schema = lf.collect_schema()
    if named_by or not keys or [b for b in by if not isinstance(b, str)] or list(by) != keys \
            or not all(k in schema for k in keys):
        return lf
    try:
        wanted = pl.from_pandas(groups.reset_index(drop=True)).cast({k: schema[k] for k in keys})
        try:
            return lf.join(wanted.lazy(), on=keys, how="semi", nulls_equal=True)
        except TypeError:  # (polars before 1.23 names it join_nulls)
            return lf.join(wanted.lazy(), on=keys, how="semi", join_nulls=True)
    except Exception:
        return lf


@functools.cache
def streams_lazy_queries() -> bool:
    """Polars 2 and later collect a lazy query with the streaming engine by default (an eager
    ``group_by`` stays in memory, several times slower on string keys)."""
    import polars as pl

    try:
        return int(pl.__version__.split(".")[0]) >= 2
    except ValueError:
        return False


def grouped(lf: Any, by: list[Any], named_by: dict, exprs: list[Any]) -> Any:
    """``lf.group_by(by).agg(exprs)``; without keys, one group (a constant key, dropped after)."""
    import polars as pl

    if by or named_by:
        return lf.group_by(*by, **named_by).agg(exprs)
    key = f"{contract.PREFIX}all"
    return lf.group_by(pl.lit(0).alias(key)).agg(exprs).drop(key)


def group_facts(lf: Any, by: list[Any], named_by: dict, keys: list[str], variables: list[str],
                magnitudes: set[str], unit: str | None, k: int, key_casts: dict[str, Any] | None = None,
                levels: dict[str, tuple[float, float]] | None = None, rules: Any = None) -> pd.DataFrame:
    """One extra aggregation in polars; only the per-group facts come back.

    With a unit column, one pre-aggregation to (keys, unit) — rows and per variable its
    count, sum, min and max — then the facts per group from that much smaller table.
    """
    import polars as pl

    p = contract.PREFIX
    if unit is None:
        bounded = rules is not None and k <= 2
        facts = grouped(lf, by, named_by, fact_exprs(variables, magnitudes, k, levels, bounded)).collect().to_pandas()
        if bounded:
            settle_runner_up(facts, lf, by, named_by, keys, variables, rules)
        return facts
    if not magnitudes:
        # counts only: distinct units by a hash distinct per group (about 2x cheaper than a
        # pre-aggregation to (keys, unit) when nearly every pair is distinct); a variable
        # without missing values has every unit of its group
        nulls = lf.select([pl.col(v).null_count() for v in variables]).collect().row(0) if variables else ()
        exprs = [pl.len().alias(f"{p}rows"), pl.col(unit).n_unique().alias(f"{p}units")]
        for i, (v, missing) in enumerate(zip(variables, nulls, strict=True)):
            u = pl.col(unit).n_unique() if not missing else pl.col(unit).filter(pl.col(v).is_not_null()).n_unique()
            exprs.append(u.alias(contract.fact_names(i)["n"]))
        return grouped(lf, by, named_by, exprs).collect().to_pandas()
    inner = [pl.len().alias(f"{p}r")]
    for i, v in enumerate(variables):
        inner.append(pl.col(v).count().alias(f"{p}c{i}"))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            inner.append(x.sum().alias(f"{p}s{i}"))
            if levels and v in levels:  # a unit has the attribute if one of its rows has it
                inner.append((x == levels[v][0]).any().alias(f"{p}a{i}"))
    per_unit = grouped(lf, [*by, pl.col(unit).alias(f"{p}u")], named_by, inner)
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
    return grouped(per_unit, keys, {}, outer).collect().to_pandas()


def set_indicators(facts: pd.DataFrame, ge: Any, variables: list[str],
                   levels: dict[str, tuple[float, float]] | None = None) -> None:
    """Mark indicator variables (only 0/1, or two values, over the whole aggregation) with the
    units having the attribute per group (``VarEvidence.ones``) and the value marking it
    (``VarEvidence.level``, the other value ``low``), as the pandas path does
    (:func:`sdc_magic.evidence.facts.indicator_level`): their sums and means are counts.
    ``levels``: the values polars counted ``ones`` at (:func:`indicator_levels`)."""
    import numpy as np

    p = contract.PREFIX

    def num(name: str) -> np.ndarray:
        if name not in facts.columns:
            return np.zeros(len(facts))
        return pd.to_numeric(facts[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    for i, v in enumerate(variables):
        if f"{p}ones_{i}" in facts.columns and v in ge.variables:  # counted by the engine (polars)
            ge.variables[v].ones = np.nan_to_num(num(f"{p}ones_{i}")).astype(np.int64)
            ge.variables[v].level, ge.variables[v].low = (levels or {}).get(v, (None, None))  # (unknown:
            continue  # not counted in the engine)
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
        ge.variables[v].level, ge.variables[v].low = level, (0.0 if {lo, hi} <= {0.0, 1.0} else lo)


#: Up to this many source rows linking reads the values themselves (see :func:`linking_rows`).
RAW_LINKED_ROWS = 1_000_000


#: the column carrying each row's earlier position while the linking rows are computed
ROW_LABEL = "__sdc_magic_position"


def linking_rows(lf: Any, by: list[Any], named_by: dict, keys: list[str],
                 resolved: dict[str, tuple[str | None, str]], n_rows: int, positions: Any = None,
                 notes: list[str] | None = None) -> pd.DataFrame | None:
    """The rows behind a table for linking (:func:`contract.register`'s ``rows``), or None.

    One row per source row that reached the aggregation: the grouping keys as the table
    shows them, and per other column a 64-bit hash computed by polars (the values never
    leave polars). Skipped above ``evidence.rows.MAX_FETCHED_ROWS`` rows (what leaves the
    engine for linking is bounded) and if anything fails: the table is then checked
    on its own. A table of one variable's statistics covers the rows where it is known.
    ``positions``: (or a function giving them, asked only here) where each row was in the frame it was taken from (:mod:`.origins`), which
    labels the rows as pandas' index does, or their pandas labels (an Index: a frame from
    ``pl.from_pandas``); else they are labelled by their own positions.
    ``notes``: the table's notes, told why when there are no rows (linking reads the note:
    a table compared with nothing is not called cleared beside other outputs).
    """
    rows = _linking_rows(lf, by, named_by, keys, resolved, n_rows, positions() if callable(positions) else positions)
    if rows is None and notes is not None and n_rows > 0:
        from ...evidence import rows as row_limits

        notes.append(row_limits.too_many_rows_note(row_limits.MAX_FETCHED_ROWS)
                     if n_rows > row_limits.MAX_FETCHED_ROWS
                     else row_limits.unreadable_rows_note())
    return rows


def _linking_rows(lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], n_rows: int, positions: Any) -> pd.DataFrame | None:
    import polars as pl

    from ...evidence import rows as row_limits

    if n_rows <= 0 or n_rows > row_limits.MAX_FETCHED_ROWS:
        return None
    try:
        schema = lf.collect_schema()
        key_exprs = [pl.col(b) if isinstance(b, str) else b for b in by]
        key_exprs += [(pl.col(e) if isinstance(e, str) else e).alias(str(n)) for n, e in named_by.items()]
        # linking reads the first row_limits.MAX_HASHED_COLUMNS columns: hash no more than it reads
        room = max(row_limits.MAX_HASHED_COLUMNS - len(keys), 1)
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
        labelled = positions is not None and len(positions) == lf.select(pl.len()).collect().item()
        if labelled:
            # pandas labels (a frame from ``pl.from_pandas``) travel as positions, taken after
            by_position = isinstance(positions, pd.Index)
            query = query.with_columns(pl.Series(ROW_LABEL, np.arange(len(positions), dtype=np.int64)
                                                 if by_position else positions))
        if "size" not in stats and len(variables) == 1 and next(iter(variables)) in schema:
            query = query.filter(pl.col(next(iter(variables))).is_not_null())
        rows = query.select([*key_exprs, *hashes, *([pl.col(ROW_LABEL)] if labelled else [])]).collect().to_pandas()
        if labelled:
            at = rows.pop(ROW_LABEL).to_numpy()
            rows.index = positions.take(at) if by_position else pd.Index(at)
            if by_position:
                rows.attrs[row_limits.FRAME_LABELS] = True
        return rows if len(rows) <= row_limits.MAX_LINKED_ROWS else None
    except Exception:
        return None
