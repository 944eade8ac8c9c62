"""Group sizes used as labels: a number that is the size of a group is a count (issue 23.2).

Red team round 3: ``df.groupby("district")["case_id"].transform("size").value_counts()`` was
``pass`` with labels 2 and 3 (the districts of exactly 2 and 3 cases), each label held by five
rows or more; next to the ordinary district table (small districts hidden) every hidden district
was pinned to [2, 3].  The table's cells are large, its *labels* are the small counts.

How it is recognised, from the data and not from how the column was made (it may have been
assigned to the frame, renamed, copied): a dimension whose values, row by row, equal the size of
each row's group under another column of the same rows.  Two cheap tests come first, on the
table alone: every label is a whole number ≥ 1 and the rows carrying label v are a multiple of v
(v rows per group of size v); and some label is below the threshold.  Only then is the frame
grouped, by each candidate column.

Which columns count as groups: categories, not identifiers.  The sizes of a household (people
per ``household_id``) are an attribute of each household, published everywhere as "people by
household size"; the sizes of districts are the cells of the district table.  A column whose
groups hold fewer than ``threshold`` rows on average (more distinct values than rows ÷
threshold) is taken as an identifier of small units: a table of its groups would be mostly
hidden cells anyway, so its sizes are not cells of any table.  That line is our decision; see
docs/rules.md.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

import numpy as np
import pandas as pd

_ONE_NUMBER = re.compile(r"^\D*?(\d+)\D*$")


def numbers_in(values: pd.Series | np.ndarray) -> pd.Series | None:
    """The numbers the values state: numbers as they are; text or categories that hold exactly one
    whole number each ("2 cases", "3", "n=4") as that number (issue 23.2: a group size written
    into a text label is the same count). None when some value states no number, or several."""
    series = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object)
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    if pd.api.types.is_bool_dtype(series.dtype):
        return None
    if pd.api.types.is_integer_dtype(series.dtype) or pd.api.types.is_float_dtype(series.dtype):
        return series
    # each distinct value read once (a table's labels repeat: 10,000 cells, ~100 labels)
    codes, uniques = pd.factorize(series)
    missing = codes < 0
    if missing.any() and not all(isinstance(v, float) for v in series[missing].tolist()):
        return None  # (None, pd.NA: no number; a float NaN is a missing number, kept as NaN)
    stated = np.empty(len(uniques) + 1, dtype=float)
    stated[-1] = np.nan
    for i, v in enumerate(uniques.tolist() if hasattr(uniques, "tolist") else list(uniques)):
        if isinstance(v, bool):
            return None
        if isinstance(v, (int, float, np.integer, np.floating)):
            stated[i] = float(v)
            continue
        if not isinstance(v, str):
            return None
        found = _ONE_NUMBER.match(v)
        if found is None:
            return None
        stated[i] = float(found.group(1))
    return pd.Series(stated[codes], index=series.index)


def size_labels(values: pd.Series, rows: pd.DataFrame | None, threshold: int,
                own_name: Hashable | None = None, labels: np.ndarray | None = None) -> Hashable | None:
    """The column of ``rows`` whose group sizes ``values`` are, when some size is below ``threshold``.

    ``values`` and ``rows`` are aligned row by row (same length and order).  ``labels``: the
    table's labels of this dimension, when known (tested first: no pass over the rows unless
    they are whole numbers ≥ 1, some below the threshold).  None when the values are not such
    sizes, or none is small.
    """
    if rows is None or len(values) != len(rows) or not could_be_sizes(values, threshold, labels):
        return None
    stated = numbers_in(values)
    if stated is None:
        return None
    v = stated.to_numpy(dtype=float, na_value=np.nan)
    limit = len(rows) / max(threshold, 1)  # more groups than this: units (households), not categories
    for name in rows.columns:
        if own_name is not None and name == own_name:
            continue
        col = rows[name]
        try:
            if col.nunique(dropna=False) > limit:
                continue
            sizes = col.groupby(col, dropna=False, observed=True, sort=False).transform("size")
        except (TypeError, ValueError):
            continue
        if np.array_equal(sizes.to_numpy(dtype=float, na_value=np.nan), v):
            return name
    return None


def could_be_sizes(values: pd.Series, threshold: int, labels: np.ndarray | None = None) -> bool:
    """The cheap tests: whole numbers ≥ 1 (or text stating one each), some below the threshold,
    v rows per group of size v."""
    if len(values) == 0:
        return False
    if labels is not None:
        stated_labels = numbers_in(pd.Series(labels, dtype=object))
        if stated_labels is None:
            return False
        lab = stated_labels.to_numpy(dtype=float)
        lab = lab[~np.isnan(lab)]
        if not len(lab) or (lab < 1).any() or (lab != np.round(lab)).any() or not (lab < threshold).any():
            return False
    stated = numbers_in(values)
    if stated is None:
        return False
    counts = stated.value_counts(dropna=False)
    v_labels = pd.to_numeric(pd.Series(counts.index, dtype=object), errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(v_labels).all() or (v_labels < 1).any() or (v_labels != np.round(v_labels)).any():
        return False
    return bool((v_labels < threshold).any() and (counts.to_numpy() % v_labels == 0).all())
