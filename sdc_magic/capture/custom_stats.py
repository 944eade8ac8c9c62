"""What a statistic the analyst wrote computes, found by moving one unit's value at a time.

Why (issue 23.6): ``groupby(...).age.apply(lambda s: s.sort_values().iloc[-1])`` is the oldest
person of each group, and ``agg(lambda s: s.sum() - s.max())`` beside the sum is the largest
contribution; as "custom" statistics they were judged by the groups' sizes only and shown.
Their code cannot be read, but what they depend on can be measured: in a few groups, the
largest, the smallest and a middle value are moved by less than the gap to their neighbours
(so that the order of the values is kept), and the statistic computed again.

* only the largest (smallest) value moves it, one for one: a maximum (minimum) by another
  name, judged as one (an extreme: one unit's own value);
* only the middle value moves it, one for one: a median (judged by the position rule);
* (each of these three only when another unit moved past the others takes that rank and moves
  it too; one that follows a row, ``s.iloc[0]``, is judged as ``first``: one unit's value);
* one unit's value moves it one for one *more* than every other value does (a total less
  one unit, ``max - mean``): with the group's total or mean beside it, that is the unit's
  value (:data:`TOTAL_LESS_ONE`, always primary);
* anything else stays ``custom`` (frequency rule and review, as before).

The analyst's function is called again on copies of a few groups (its printing silenced,
its errors ignored): statistics passed to ``agg``/``apply`` are computations, and one that
fails or takes another path on the copies simply stays ``custom``.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..rules import stat_kind

#: The statistic of a function that adds up all its group's values but one.
TOTAL_LESS_ONE = "total less one unit"
#: Groups probed at most, and their rows at most in all.
MAX_GROUPS = 20
MAX_ROWS = 200_000


def probe_statistic(fn: Callable[[pd.Series], Any], values: pd.Series, ids: np.ndarray) -> str | None:
    """The statistic ``fn`` computes on the groups of ``values`` (``ids``: group per row, -1 none),
    as one of ``"max"``, ``"min"``, ``"first"``, ``"median"``, :data:`TOTAL_LESS_ONE`; None when it is none
    of them."""
    if not pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
        return None
    ids = np.asarray(ids)
    valid = ids >= 0
    if not valid.any():
        return None
    sizes = np.bincount(ids[valid])
    order = np.argsort(-sizes, kind="stable")
    found: set[str] = set()
    rows = 0
    probed = 0
    for g in order:
        if probed >= MAX_GROUPS or rows + sizes[g] > MAX_ROWS or sizes[g] < 3:
            break
        group = values[ids == g]
        verdict = _one_group(fn, group)
        rows += int(sizes[g])
        if verdict is None:
            continue
        probed += 1
        found.add(verdict)
    if TOTAL_LESS_ONE in found:
        return TOTAL_LESS_ONE
    for extreme in ("max", "min", "first"):
        if extreme in found:
            return extreme
    if found == {"median"}:
        return "median"
    return None


def _one_group(fn: Callable[[pd.Series], Any], group: pd.Series) -> str | None:
    v = pd.to_numeric(group, errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(v).all():
        return None
    distinct = np.unique(v)
    if len(distinct) < 3:
        return None  # the largest, the smallest and a middle value must differ
    delta = float(np.min(np.diff(distinct))) / 4.0
    base = _call(fn, group)
    if base is None:
        return None
    order = np.argsort(v, kind="stable")
    probes = {"max": (int(order[-1]), delta), "min": (int(order[0]), -delta),
              "median": (int(order[len(order) // 2]), delta)}
    for name, pos in (("first", 0), ("last", len(v) - 1)):  # rows: s.iloc[0] follows neither rank
        if pos not in {p for p, _ in probes.values()}:
            probes[name] = (pos, delta)
    weight: dict[str, float] = {}
    for name, (pos, step) in probes.items():
        copy = group.astype(float).copy()
        copy.iloc[pos] += step
        got = _call(fn, copy)
        if got is None:
            return None
        weight[name] = (got - base) / step  # how much of this unit's value the statistic holds
    unit = _which_unit(weight)
    if unit in ("max", "min", "median"):
        return unit if _follows_rank(fn, group, v, order, unit, base, delta) else "first"
    return "first" if unit == "last" else unit


def _follows_rank(fn: Callable[[pd.Series], Any], group: pd.Series, v: np.ndarray, order: np.ndarray,
                  unit: str, base: float, delta: float) -> bool:
    """Whether the statistic follows a rank (the largest, the smallest, the middle) rather than a
    row (``s.iloc[0]`` that happened to be the largest): another unit moved past the others
    takes that rank, and the statistic changes with it. A row it follows is still one unit's
    value (judged as ``first``)."""
    copy = group.astype(float).copy()
    if unit == "min":
        copy.iloc[int(order[-1])] = float(v.min()) - 8 * delta  # the largest becomes the smallest
        expected: float | None = float(v.min()) - 8 * delta
    else:
        copy.iloc[int(order[0])] = float(v.max()) + 8 * delta  # the smallest becomes the largest
        expected = float(v.max()) + 8 * delta if unit == "max" else None
    got = _call(fn, copy)
    if got is None:
        return False
    if expected is not None:
        return abs(got - expected) <= 1e-6 * delta
    return abs(got - base) > 1e-6 * delta


def _which_unit(weight: dict[str, float], tol: float = 1e-6) -> str | None:
    """From the weights of the largest, smallest and middle values: the unit whose value the
    statistic holds one for one, beyond what it holds of every value (a multiple of the total)."""
    names = list(weight)
    for odd in names:
        others = [weight[n] for n in names if n != odd]
        common = others[0]
        if any(abs(o - common) > tol for o in others) or abs(abs(weight[odd] - common) - 1.0) > tol:
            continue
        # common = 0: that unit's value itself; otherwise that value plus a multiple of the total
        # (a total less one unit, a maximum less the mean): the total or the mean beside it gives it
        return odd if abs(common) <= tol else TOTAL_LESS_ONE
    return None


def _call(fn: Callable[[pd.Series], Any], group: pd.Series) -> float | None:
    """``fn(group)`` as a finite number, its output silenced; None when it is not one or fails."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            out = fn(group)
        value = float(out)
    except Exception:
        return None
    return value if np.isfinite(value) else None


def probed_measures(measure_of: Callable[[str], tuple[Any, str]], name: str, args: tuple, kwargs: dict, obj: Any,
                    ids: np.ndarray, notes: list[str], stat_of: Callable[[Any], str]
                    ) -> Callable[[str], tuple[Any, str]]:
    """``measure_of`` with the analyst's own functions named by what they compute (a maximum, a
    total less one unit...: see :mod:`.custom_stats`) instead of ``custom``."""
    functions = custom_functions(name, args, kwargs, obj, stat_of)
    if not functions:
        return measure_of
    verdicts = {}
    for var, fn in functions.items():
        values = obj if isinstance(obj, pd.Series) else obj[var]
        verdict = probe_statistic(fn, values, ids)
        if verdict is not None:
            verdicts[var] = verdict
            notes.append(f"the function applied to {var} moves with {FOLLOWS[verdict]} of each group only: "
                         f"judged as {'a' if verdict != 'total less one unit' else 'the'} {verdict}")

    def probed(measure: str) -> tuple[Any, str]:
        var, stat = measure_of(measure)
        return (var, verdicts[var]) if var in verdicts and stat_kind(stat) == "custom" else (var, stat)

    return probed if verdicts else measure_of


FOLLOWS = {"max": "the largest value", "min": "the smallest value", "median": "the middle value",
            "first": "one row's value", "total less one unit": "every value but one"}


def custom_functions(name: str, args: tuple, kwargs: dict, obj: Any, stat_of: Callable[[Any], str]
                     ) -> dict[Any, Callable]:
    """The analyst's own functions of a GroupBy ``apply``/``agg`` call, by the variable they take
    (``stat_of``: the statistic a function is known to compute, see ``capture.pandas.stat_name``)."""
    if name not in ("apply", "agg", "aggregate"):
        return {}
    spec = args[0] if args else kwargs.get("func")

    def own(f: Any) -> bool:
        return callable(f) and not isinstance(f, str) and stat_kind(stat_of(f)) == "custom"

    if isinstance(obj, pd.Series):
        return {obj.name: spec} if own(spec) else {}
    if name == "apply" or not isinstance(obj, pd.DataFrame):
        return {}  # a function of a whole frame: not a statistic of one variable
    if isinstance(spec, dict):
        return {c: f for c, f in spec.items() if c in obj.columns and own(f)}
    if spec is None:  # named aggregation: out=("column", function)
        return {v[0]: v[1] for v in kwargs.values()
                if isinstance(v, tuple) and len(v) == 2 and v[0] in obj.columns and own(v[1])}
    return {c: spec for c in obj.columns} if own(spec) else {}
