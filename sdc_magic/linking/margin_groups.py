"""Which margin of a table's population each displayed margin cell is (``margins=True``).

A crosstab's ``All`` row is the population's level without the row key: this module names, for
each displayed margin cell, that level (the keys it keeps) and its group there. Differencing uses
it to tell the margin that differs from earlier outputs by a few units from the margins hidden
beside it (:func:`.differencing.differencing_reasons`), and the session to remember which margins
a display hid (:func:`.hidden_cells.record_hidden_margins`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..evidence.flatten import canonical_labels


def displayed_margin_groups(pop: Any, flat: Any, positions: np.ndarray, display_margin: np.ndarray,
                            label: Any) -> list[tuple[tuple[str, ...], int] | None]:
    """Per displayed margin cell (flat index of ``display_margin``), its (level, group) in ``pop``;
    None when it cannot be told (no margin label, a key the table does not show, a label not found)."""
    keys = list(pop.keys)
    if label is None or not set(keys) <= set(flat.dims):
        return [None] * len(display_margin)
    out: list[tuple[tuple[str, ...], int] | None] = []
    # per level, its groups by their labels' text (the first group of a text, as a scan found it)
    lookups: dict[tuple[str, ...], dict[tuple[str, ...], int]] = {}
    for i in np.asarray(display_margin).tolist():
        cell = int(positions[i])
        values = {k: flat.dims[k][cell] for k in keys}
        subset = tuple(k for k in keys if not (isinstance(values[k], str) and values[k] == label))
        if subset == tuple(keys):
            out.append(None)
            continue
        if subset not in lookups:
            lookups[subset] = {}
            for g, lab in enumerate(pop.level(subset)[1]):
                lookups[subset].setdefault(tuple(str(v) for v in lab), g)
        wanted = tuple(str(canonical_labels(np.array([values[k]], dtype=object))[0]) for k in subset)
        g = lookups[subset].get(wanted)
        out.append(None if g is None else (subset, g))
    return out
