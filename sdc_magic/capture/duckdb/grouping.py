"""How linking's count groups a base's rows on the connection: by the columns its expressions read
first, when those have few combinations (``sql_lineage.lineage_value_query``'s ``first_by``).

Why: each display of a long session counts the base by every recorded output's conditions, five
per table of two rates; by the 30th table that is a ``GROUP BY`` of 107 boolean columns over the
base's rows, 0.30 CPU s of a 1.1 s display at 1M rows, growing with every table. Grouped first by
the five columns they read (24,000 combinations), the same count took 0.08 s (stop 65).

Whether it pays is decided from the columns' approximate distinct counts (HyperLogLog, the same
answer for the same data whatever the threads), asked once per base and column and kept: a
column of many values (an income compared with a threshold) would make the first grouping as
large as the base. The result is the same either way, row for row (a float column is never
grouped first: ``-0.0`` and ``0.0`` are one group, which an expression could tell apart); a
first grouping the engine refuses is counted the direct way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from .. import grouping_rule
from ..sql_lineage import Lineage, columns_read, first_grouping, lineage_value_query, quoted

#: Types grouped first: one group holds one value (text: one sequence of bytes, see
#: ``sql_lineage.first_grouping``); no float (``-0.0`` and ``0.0`` are one group), nothing nested.
_EXACT_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                          "UINTEGER", "UBIGINT", "UHUGEINT", "VARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S",
                          "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE", "DECIMAL", "ENUM", "UUID"})
#: What is kept of each base (at most ``grouping_rule.MAX_KEPT`` entries, then forgotten): its rows and the
#: approximate distinct values of the columns asked about, with their types. Only the decision
#: whether grouping first pays reads them; the columns' types are asked at every count (no row
#: read: a table replaced by another of the same name, or another connection's, has others).
_rows: dict[str, int] = {}
_distinct: dict[tuple[str, str, str], int] = {}

Run = Callable[[str], Any]

#: Whether a text column compares values equal that differ in bytes (a collation: ``NOCASE``,
#: ``NOACCENT``): its groups are then labelled by one of their spellings, which one depending on the
#: order rows are met, and a count grouped first could label 'a' what the table and the direct
#: count labelled 'A' (red team, stop 65). Such a column is never grouped first; nor is text under
#: the connection's default collation. (An ICU collation that merges other spellings is not probed.)
_COLLATED = ("bool_or(({s} = lower({s}) AND encode({s}) <> encode(lower({s}))) OR ({s} = upper({s}) AND "
             "encode({s}) <> encode(upper({s}))) OR ({s} = strip_accents({s}) AND encode({s}) <> "
             "encode(strip_accents({s}))))")


def first_by(run: Run, rows: Lineage, expressions: list[str]) -> list[tuple[str, str]] | None:
    """How to group ``rows``' base first for a count over ``expressions`` (per column read, its
    select item and grouping key), or None."""
    if not grouping_rule.worth_asking(len(expressions)):
        return None
    columns = columns_read(expressions)
    if not columns or any(c.lower().startswith("_sdc_") for c in columns):
        return None  # (``_sdc_…``: the names of the first grouping's own sums)
    base = rows.base
    try:
        relation = run(f"SELECT * {base} LIMIT 0")
        kinds = {str(c).lower(): str(t).upper() for c, t in zip(relation.columns, relation.types, strict=True)}
        if not all(c.lower() in kinds for c in columns):
            return None  # (a name that is no column of the base: a lambda's variable, a struct's field)
        types = [kinds[c.lower()] for c in columns]
        if not all("[" not in t and t.split("(")[0].strip() in _EXACT_TYPES for t in types):
            return None
        keys = [(base, c.lower(), t) for c, t in zip(columns, types, strict=True)]
        if len(_distinct) > grouping_rule.MAX_KEPT:
            _distinct.clear()
            _rows.clear()
        if base not in _rows:
            _rows[base] = int(run(f"SELECT count(*) AS n {base}").df()["n"].iloc[0])
        texts = "VARCHAR" in types
        if texts and str(run("SELECT current_setting('default_collation') AS c").df()["c"].iloc[0]):
            return None  # (text compared under a collation: see _COLLATED)
        missing = [c for c, key in zip(columns, keys, strict=True) if key not in _distinct]
        if missing:
            items = [f"approx_count_distinct({quoted(c)}) AS d{i}" for i, c in enumerate(missing)]
            items += [f"{_COLLATED.format(s=quoted(c))} AS x{i}" for i, c in enumerate(missing)
                      if kinds[c.lower()] == "VARCHAR"]
            counts = run(f"SELECT {', '.join(items)} {base}").df().iloc[0]
            for i, c in enumerate(missing):
                collated = f"x{i}" in counts.index and bool(counts[f"x{i}"])
                _distinct[(base, c.lower(), kinds[c.lower()])] = -1 if collated else int(counts[f"d{i}"])
    except Exception:  # (a base the engine cannot describe: counted the direct way)
        return None
    if any(_distinct[key] < 0 for key in keys):
        return None
    if not grouping_rule.pays([_distinct[key] for key in keys], _rows[base]):
        return None
    return [first_grouping(c, t == "VARCHAR") for c, t in zip(columns, types, strict=True)]


def counted(run: Run, rows: Lineage, expressions: list[str], values: list[str]) -> pd.DataFrame:
    """The count of ``rows``' base over ``expressions`` (with ``values``' checksums), grouped by
    the columns they read first when that pays (see the module's docstring)."""
    first = first_by(run, rows, expressions)
    if first:
        try:
            return run(lineage_value_query(rows, expressions, values, first)).df()
        except Exception:  # (e.g. a name the parser took for a column: the direct count decides)
            pass
    return run(lineage_value_query(rows, expressions, values)).df()
