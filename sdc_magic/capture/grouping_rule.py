"""When linking's count of a base groups it first by the columns its expressions read: the rule
both engines follow (``capture/duckdb/grouping.py``, ``capture/polars/grouping.py``).

Why one rule: a long session's count is of ~100 expressions of a few columns; grouped first by those
columns, the expressions are computed on the groups, not on every row (stop 65). It pays only with
many expressions and columns of few combinations, judged from approximate distinct counts (the
same answer for the same data whatever the threads); the result is the same frame either way.
"""

from __future__ import annotations

import math

#: Grouped first only from this many expressions on: below, one grouping costs as much.
FIRST_FROM_EXPRESSIONS = 12
#: ... and when the columns read have at most this many combinations (the product of their
#: distinct values, one more each for missing), and at most this share of the base's rows.
MOST_COMBINATIONS = 200_000
MOST_SHARE_OF_ROWS = 0.25
#: Distinct counts an engine keeps (per base, column and type) before it forgets them all.
MAX_KEPT = 4096


def worth_asking(n_expressions: int) -> bool:
    """Whether a count over this many expressions may be grouped first at all."""
    return n_expressions >= FIRST_FROM_EXPRESSIONS


def pays(distinct: list[int], rows: int) -> bool:
    """Whether columns of these approximate distinct counts are few enough to group ``rows`` by first."""
    return math.prod(d + 1 for d in distinct) <= min(MOST_COMBINATIONS, MOST_SHARE_OF_ROWS * rows)
