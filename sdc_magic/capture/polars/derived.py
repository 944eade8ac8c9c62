"""polars frames computed from aggregates stay aggregates (issue 23.3).

Why: a frame made from a captured ``group_by`` result by ``with_columns`` (a running total, a
share, a constant label), ``join``, ``filter``, ``hstack``/``vstack``, ``unpivot`` ... has no
evidence of its own. It was displayed as row-level data, drawn as it is: C's count of 3 beside
its running total, ``72 - 70 = 2``. Marked here (:func:`sdc_magic.capture.contract.mark_untraced`),
the display checks it as an aggregate without evidence: whole numbers as counts, and the
columns computed from the aggregates withheld with every number that is not a count.

Which columns are *computed*: those in no input frame, and those an input has under the same
name with other values (``pl.col("len") * 2`` keeps the name). A column copied from an input
(the aggregate's own cells, a joined lookup table's labels) is not; nor is a constant text
column (``pl.lit("people")``), a label that reveals nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .. import contract

#: DataFrame methods whose result is computed from the frame's rows (and their other frames')
DERIVING_METHODS = ("with_columns", "with_columns_seq", "join", "join_asof", "hstack", "vstack", "filter",
                    "unpivot", "transpose", "with_row_index", "fill_null", "fill_nan", "cast", "drop", "unique",
                    "drop_nulls", "slice", "sample", "gather_every", "explode", "top_k", "bottom_k")
#: why describe() of an aggregated frame is not shown (as for pandas)
DESCRIBE_OF_AGGREGATE = ("describe() of an aggregated table summarises its cells (their minimum, their "
                         "quartiles): the very cells its protection hides, so it is not shown. Show the table itself (it "
                         "is checked), or describe the microdata.")


def is_aggregate_frame(frame: Any, captured: Callable[[Any], bool]) -> bool:
    """A captured aggregation's result (``captured``), or a frame already marked as computed from one."""
    return captured(frame) or contract.is_aggregate(frame) or contract.form_of(frame) is not None


def frames_in(first: Any, args: tuple, kwargs: dict) -> list[Any]:
    """The polars DataFrames a method call reads: the frame, and any frame among its arguments."""
    import polars as pl

    found = [first]
    for value in (*args, *kwargs.values()):
        items = value if isinstance(value, list | tuple) else [value]
        found.extend(v for v in items if isinstance(v, pl.DataFrame))
    return found


def mark_derived(inputs: list[Any], result: Any, captured: Callable[[Any], bool],
                 windows: tuple[str, ...] = ()) -> None:
    """Mark ``result`` untraced when it has no evidence of its own and an input is an aggregate,
    or the call computed ``windows``: columns over groups of rows (``pl.len().over("district")``
    is each row's group size, a count whatever the row count)."""
    import polars as pl

    if not isinstance(result, pl.DataFrame) or contract.form_of(result) is not None \
            or contract.withheld_reason(result) is not None:
        return
    aggregates = [f for f in inputs if isinstance(f, pl.DataFrame) and is_aggregate_frame(f, captured)]
    # a frame with its groups' counts beside each row keeps them withheld through later steps
    # (filter to C, select, unique: each row of C still says 3)
    carried = [w for f in inputs if isinstance(f, pl.DataFrame) for w in (contract.row_window_columns(f) or ())]
    windows = (*windows, *carried)
    if "*" in windows:  # an expression of several outputs: every column the call computed
        windows = computed_columns(inputs, result)
    windows = tuple(w for w in windows if w in result.columns)
    if not aggregates and not windows:
        return
    if not aggregates:  # rows with their groups' figures beside them: row-level, those withheld
        contract.mark_row_windows(result, windows)
        return
    computed = computed_columns(inputs, result)
    contract.mark_untraced(result, tuple(dict.fromkeys((*computed, *windows))))


def window_columns(args: tuple, kwargs: dict) -> tuple[str, ...]:
    """The output columns of a call's expressions computed over groups of rows (``.over(...)``)."""
    import polars as pl

    found = []
    named = [(None, a) for a in args] + list(kwargs.items())
    for name, value in named:
        for expr in value if isinstance(value, list | tuple) else [value]:
            if isinstance(expr, pl.Expr) and ".over(" in str(expr):
                try:
                    found.append(str(name) if name is not None else expr.meta.output_name())
                except Exception:  # an expression without one output name: every column it makes
                    found.append("*")
    return tuple(found)


def computed_columns(inputs: list[Any], result: Any) -> tuple[str, ...]:
    """The result's columns computed in the call (see the module docstring)."""
    import polars as pl

    computed = []
    for name in result.columns:
        column = result.get_column(name)
        sources = [f for f in inputs if isinstance(f, pl.DataFrame) and name in f.columns]
        if any(_copied(f.get_column(name), column) for f in sources):
            continue
        if sources == [] and column.dtype == pl.String and column.n_unique() <= 1:
            continue  # a constant label
        computed.append(str(name))
    return tuple(computed)


def _copied(source: Any, column: Any) -> bool:
    """``column`` holds ``source``'s values: the same ones in any order (a join or a sort moves
    rows), or, with another number of rows (filtered, stacked, made unique), of the same type."""
    if source.dtype != column.dtype:
        return False
    if len(source) != len(column):
        return True  # rows filtered, stacked or made unique: the values are the input's own
    try:
        return bool(source.sort(nulls_last=True).equals(column.sort(nulls_last=True)))
    except Exception:
        return False


def withhold_describe(result: Any) -> None:
    """Withhold a describe() of an aggregate: its pandas form is marked and remembered."""
    import polars as pl

    if not isinstance(result, pl.DataFrame):
        return
    form = result.to_pandas()
    contract.mark_withheld(form, DESCRIBE_OF_AGGREGATE)
    contract.remember(result, form)


def filter_pins(frame: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``frame.filter(...)`` bounds one of the frame's numeric columns from both sides.

    ``agg.filter(pl.col("len") == 2)`` keeps the groups of two (red team, round 8): with the
    group's count hidden, its label tells it. An equality, ``is_in``, ``is_between``, or a lower
    and an upper comparison on the figures (not on a text key: ``pl.col("region") == "A"`` is a
    selection by label) mark the result (``contract.mark_selected_by_values``).
    """
    import json

    import polars as pl

    numeric = {c for c, t in frame.schema.items() if t.is_numeric()}
    predicates = [a for a in (*args, *kwargs.values()) if isinstance(a, pl.Expr)]
    for predicate in predicates:
        tree = json.loads(predicate.meta.serialize(format="json"))
        if not (set(predicate.meta.root_names()) & numeric):
            continue
        text = json.dumps(tree)
        if any(f'"{op}"' in text for op in ("Eq", "EqValidity", "IsIn", "IsBetween")):
            return True
        # (red team: `(len != 2).not_()`, `-len > -3`, `len != 15`: a negation, arithmetic on the
        # figure or a value left out pins it too; `len != 0` leaves out the empty groups only)
        if '"Not"' in text or '"Negate"' in text or any(f'"op": "{op}"' in text for op in _ARITHMETIC_OPS):
            return True
        if '"op": "NotEq"' in text and '{"Int": 0}' not in text:
            return True
        if _SMALL_LOWER.search(text):  # (len > 1: each group left out is 1)
            return True
        lower = any(f'"{op}"' in text for op in ("Gt", "GtEq"))
        upper = any(f'"{op}"' in text for op in ("Lt", "LtEq"))
        if lower and upper:
            return True
    return False


def one_sided_bounds(frame: Any, args: tuple, kwargs: dict) -> list[tuple[str, str, float]]:
    """The comparisons of a numeric column with a number that every row ``frame.filter(...)`` keeps
    meets (``pl.col("len") < 10``, each side of an ``&``): ``(column, op, number)`` with op one of
    ``<``, ``<=``, ``>``, ``>=``. What a one-sided filter of an aggregate tells of the hidden
    figures it keeps, remembered across outputs (``checking/revealed.py``). Anything else (an
    ``|``, a negation, arithmetic) gives no bound: such filters are judged by :func:`filter_pins`."""
    import json

    import polars as pl

    numeric = {c for c, t in frame.schema.items() if t.is_numeric()}
    ops = {"Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
    out: list[tuple[str, str, float]] = []

    def visit(node: Any) -> None:
        expr = node.get("BinaryExpr") if isinstance(node, dict) else None
        if expr is None:
            return
        if expr.get("op") == "And":
            visit(expr.get("left"))
            visit(expr.get("right"))
            return
        left, right, op = expr.get("left"), expr.get("right"), ops.get(expr.get("op"))
        column = left.get("Column") if isinstance(left, dict) else None
        literal = (right.get("Literal") or {}).get("Dyn", {}) if isinstance(right, dict) else {}
        number = literal.get("Int", literal.get("Float")) if isinstance(literal, dict) else None
        if op is not None and column in numeric and isinstance(number, int | float) and not isinstance(number, bool):
            out.append((column, op, float(number)))

    for predicate in (*args, *kwargs.values()):
        if isinstance(predicate, pl.Expr):
            visit(json.loads(predicate.meta.serialize(format="json")))
    return out


#: a lower bound leaving out groups of 1 or 2 only (``> 1``, ``> 2``, ``>= 2``, ``>= 3``)
_SMALL_LOWER = re.compile(r'"op": "(?:Gt", "right": \{"Literal": \{"Dyn": \{"Int": [12]\}'
                          r'|GtEq", "right": \{"Literal": \{"Dyn": \{"Int": [23]\})')
_ARITHMETIC_OPS = ("Plus", "Minus", "Multiply", "Divide", "TrueDivide", "FloorDivide", "Modulus")


def readable_filter(args: tuple, kwargs: dict) -> bool:
    """Whether every condition of a polars ``filter`` is an expression :func:`filter_pins` reads (a
    mask given as a Series, list or array is not: its rule is out of reach, and a filter of an
    aggregate by it is taken as one by values: ``filter(pl.Series(len == 2 | len > 16))``)."""
    import polars as pl

    return all(isinstance(a, pl.Expr) for a in args) and all(isinstance(v, pl.Expr | str | int | float | bool)
                                                                for v in kwargs.values())
