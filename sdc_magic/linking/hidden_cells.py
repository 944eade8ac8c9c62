"""What the protection of an output hid, remembered with its population.

Split from :mod:`.populations` (which says which rows each published cell covers): a later
output whose cell has exactly the rows of a cell this one hid must hide it too
(:func:`record_hidden_model`), and a displayed margin the display hides is no published
margin (:func:`record_hidden_margins`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..evidence.flatten import canonical_labels
from .margin_groups import displayed_margin_groups
from .populations import Draft, Population


def record_hidden_model(pop: Population, models: list[dict[str, Any]]) -> None:
    """Remember which cells — inner or margins — the protection of this output hid.

    A later output whose cell has exactly the rows of one of them must hide it too: the
    pattern that protects this output relied on it staying hidden.
    """
    keys = list(pop.keys)
    for model in models:
        cells = model["cells"]
        columns = dict(zip(model["dims"], model.get("columns", model["dims"]), strict=True))
        if not set(keys) <= set(columns):
            continue
        hidden = cells[cells["status"].isin(["primary", "secondary"])]
        if hidden.empty:
            continue
        labels = {k: hidden[columns[k]].astype(object).to_numpy() for k in keys}
        # canonical text of every label, once per column (one call per cell cost 0.7 s
        # on a 2,400-cell pattern)
        texts = {k: np.array([str(v) for v in canonical_labels(labels[k])], dtype=object) for k in keys}
        fixed_mask = np.stack([labels[k] != "Total" for k in keys], axis=1) if keys else np.zeros((len(hidden), 0), bool)
        for pattern in {tuple(row) for row in fixed_mask.tolist()}:
            subset = tuple(k for k, f in zip(keys, pattern, strict=True) if f)
            rows = np.flatnonzero((fixed_mask == np.array(pattern, dtype=bool)).all(axis=1))
            level_labels = pop.level(subset)[1]
            if subset:
                lookup = {tuple(map(str, lab)): i for i, lab in enumerate(level_labels)}
                groups = set()
                for r in rows.tolist():
                    key = tuple(texts[k][r] for k in subset)
                    g = lookup.get(key)
                    if g is not None:
                        groups.add(g)
            else:
                groups = {0}
            if groups:
                pop.hidden_model.setdefault(subset, set()).update(groups)


def record_hidden_margins(d: Draft, entry: Any, positions: np.ndarray, hidden_flat: np.ndarray) -> None:
    """Remember the displayed margins (``margins=True``) the display hides.

    The protection model may publish a margin that the display then hides (a margin
    made of exactly the rows of a cell hidden elsewhere, a differencing margin): without
    this, the linking model took every displayed margin as published, and the joint
    audit derived from a hidden total the count of the few rows a filter left out.
    """
    label = getattr(entry, "margin_label", None)
    if label is None or d.display_margin is None or not len(d.display_margin):
        return
    hidden = np.asarray(hidden_flat, dtype=bool)
    groups = displayed_margin_groups(d.pop, entry.flat, positions, d.display_margin, label)
    for i, at in zip(d.display_margin.tolist(), groups, strict=True):
        if i < len(hidden) and hidden[i] and at is not None:
            d.pop.margins_hidden.setdefault(at[0], set()).add(at[1])
