"""The cells a table's protection is asked about, beyond its inner cells: margin rows.

The search (:func:`sdc_magic.protect.protect`) takes one row per inner cell and may take margin
rows labelled ``"Total"``; here are the two kinds of margin rows the display path adds: displayed
margins that are primary (differencing names them, a rule fails on them), and margins already
published by earlier outputs. A real category called "Total" is escaped so it is never taken for
the margin label.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..capture.depth import own_work
from ..evidence.registry import Entry


def without_empty_cells(inner: np.ndarray, units: np.ndarray, primary: np.ndarray) -> np.ndarray:
    """The inner cells the protection is asked about: a cell no row contributes to and no rule
    flags is left out, as the known zero it is.

    Why: a groupby's result omits a combination without rows, and the protection's model takes
    it as a known zero (:mod:`sdc_magic.protect.model`). A crosstab or a pivot_table of the same
    rows shows that combination (0 or NaN), and it was passed on as a cell the search could hide
    for nothing (its value is 0). The same rows then got two patterns: turnover of 1,000 groups,
    8 cells hidden as a groupby and 16 as a pivot_table, 4 of them empty; and the layout with
    the empty cells took 31 attacker LPs instead of 2. A hidden empty cell protects little: it
    can only be larger than 0, and that a combination is empty is often public (a structural
    zero). sdcTable's default (``allowZeros = FALSE``) marks empty cells "must publish" and
    tau-Argus's hypercube method freezes zero cells, for the same reasons. A zero that a rule
    flags (``zeros suppress``) is a primary and stays. When every cell would go, nothing is left out.
    """
    empty = (np.asarray(units, dtype=float)[inner] == 0) & ~np.asarray(primary, dtype=bool)[inner]
    if not empty.any() or empty.all():
        return inner
    return inner[~empty]


def with_primary_margins(cells: pd.DataFrame, entry: Entry, margin_primaries: np.ndarray, internal: list[str],
                         dims: list[str], top_cols: list[str]) -> pd.DataFrame:
    """Add the displayed margins that are primary (a differencing hit names a margin, a rule
    fails on one) as margin rows flagged primary, so the search protects them like any primary.

    Why (issue 23.13): only inner cells were passed on, so a primary margin was hidden but never
    protected: ``crosstab(..., margins=True)`` shown after a filtered table hid a row total by
    differencing while publishing the row's cells, and its record gave the total back as an exact
    interval. The margin's value is the sum of its inner cells here (the model's own), so the
    margin row is additive by construction."""
    if not len(margin_primaries):
        return cells
    label = entry.margin_label
    inner = cells[internal]
    rows = []
    for i in margin_primaries:
        labels = []
        for d in dims:
            value = entry.flat.dims[d][int(i)]
            total = (label is not None and value == label) or value == "" or value is None
            labels.append("Total" if total else escape_total(np.array([value], dtype=object))[0])
        kept = [c for c, lab in zip(internal, labels, strict=True) if lab != "Total"]
        if len(kept) == len(internal):
            continue  # not a margin after all
        mask = np.ones(len(cells), dtype=bool)
        for c, lab in zip(internal, labels, strict=True):
            if lab != "Total":
                mask &= (inner[c].to_numpy(dtype=object) == lab)
        if not mask.any():
            continue  # a margin of nothing: 0, nothing to protect
        row = dict(zip(internal, labels, strict=True))
        row.update(value=float(cells["value"].to_numpy()[mask].sum()),
                   units=float(cells["units"].to_numpy()[mask].sum()), primary=True)
        for t in top_cols:
            row[t] = 0.0
        rows.append(row)
    if not rows:
        return cells
    return pd.concat([cells, pd.DataFrame(rows)], ignore_index=True)


@own_work
def with_public_cells(cells: pd.DataFrame, internal: list[str], dims: list[str], public: dict,
                      top_cols: list[str]) -> pd.DataFrame:
    """Flag inner cells, and add margin rows, that earlier outputs already published."""
    position = {d: i for i, d in enumerate(dims)}
    cells = cells.copy()
    cells["publish"] = False
    existing = set(zip(*[cells[c].to_numpy(dtype=object) for c in internal], strict=True))
    rows = []
    for subset, labels in public.items():
        if not set(subset) <= set(position):
            continue
        cols = [internal[position[d]] for d in subset]
        if len(subset) == len(dims):
            keys = list(zip(*[cells[c].to_numpy() for c in cols], strict=True)) if cols else []
            order = [subset.index(d) for d in dims]
            wanted = {tuple(lab[i] for i in order) for lab in labels}
            cells.loc[[tuple(k[subset.index(d)] for d in dims) in wanted for k in keys], "publish"] = True
            continue
        inner = cells[~(cells[internal] == "Total").to_numpy().any(axis=1)]  # not primary margin rows
        sums = inner.groupby(cols, sort=False)[["value", "units"]].sum() if cols else \
            inner[["value", "units"]].sum().to_frame().T
        for label in labels:
            key = label if len(cols) > 1 else (label[0] if cols else None)
            if cols and key not in sums.index:
                continue
            # (by position: ``.loc[True]`` is refused on an index of labels that are not all
            # booleans, and a region True beside earlier outputs' region 1.0 made checking fail)
            total = sums.iloc[sums.index.get_loc(key)] if cols else sums.iloc[0]
            if isinstance(total, pd.DataFrame):
                continue  # (labels equal across types, True and 1, grouped apart: no one margin)
            row = {c: "Total" for c in internal}
            for d, value in zip(subset, label, strict=True):
                row[internal[position[d]]] = value
            if tuple(row[c] for c in internal) in existing:
                continue  # a primary margin row (see with_primary_margins): protected all the same
            row.update(value=float(total["value"]), units=float(total["units"]), primary=False, publish=True)
            for t in top_cols:
                row[t] = 0.0
            rows.append(row)
    if rows:
        cells = pd.concat([cells, pd.DataFrame(rows)], ignore_index=True)
    return cells


#: A real category called "Total" must not be taken for the engine's margin label: it is
#: passed on with a zero-width space appended (it prints the same in certificates).
REAL_TOTAL = "Total\u200b"


def escape_total(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=object)
    # each distinct label looked at once (a label per cell was 25 ms of a 10,000-cell display)
    codes, uniques = pd.factorize(values)
    total = np.array([isinstance(v, str) and v.rstrip("\u200b") == "Total" for v in uniques.tolist()] + [False],
                     dtype=bool)
    hit = total[codes]
    if not hit.any():
        return values
    out = values.copy()
    out[hit] = [v + "\u200b" for v in values[hit]]
    return out
