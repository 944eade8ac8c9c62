"""The table as a linear system: every cell (inner cells and all margins) and M·a = 0.

Why a relation matrix: an attacker who sees some cells of a table and knows how the
cells add up can solve for hidden ones.  Every "total = sum of parts" equation the
attacker may use is one row of ``M`` (Fischetti–Salazar model, the one tau-Argus and
sdcTable use): for every dimension, for every node of that dimension that has parts
(the grand ``Total`` and every declared hierarchy sub-total) and for every
combination of codes of the other dimensions, ``cell(node, ...) − Σ cell(part, ...) = 0``.

A cell exists only when at least one inner cell contributes to it: an inner
combination absent from the data is a known zero (a groupby result simply omits it),
so it needs no variable, and a margin of known zeros is a known zero too.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

TOTAL = "Total"


@dataclass
class Dimension:
    """One dimension's codes: ``Total``, hierarchy nodes (top-down), then leaves.

    ``parent[c]`` is the code index of c's parent (-1 for Total); ``children[c]`` lists
    the parts of an internal code.  Leaves are the labels found in the data.
    """

    name: str
    labels: list[Hashable]
    parent: np.ndarray
    children: dict[int, list[int]]
    n_leaves: int
    leaf_offset: int

    def ancestors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (indptr, codes): for each leaf, itself and every ancestor up to Total."""
        ptr = [0]
        out: list[int] = []
        for leaf in range(self.n_leaves):
            c = self.leaf_offset + leaf
            while c >= 0:
                out.append(c)
                c = int(self.parent[c])
            ptr.append(len(out))
        return np.asarray(ptr, dtype=np.int64), np.asarray(out, dtype=np.int64)


def sorted_labels(values: pd.Series) -> list[Hashable]:
    uniq = list(pd.unique(values))
    try:
        return sorted(uniq)  # type: ignore[type-var]
    except TypeError:
        return uniq


def build_dimension(name: str, leaves: list[Hashable], hierarchy: Mapping[Hashable, Sequence[Hashable]] | None
                    ) -> Dimension:
    """Codes of one dimension from its leaf labels and an optional parent -> parts mapping.

    A hierarchy may be nested (a part may itself be a parent).  Leaves not placed in
    the hierarchy sit directly under ``Total``; parents with no leaf in the data are
    dropped (their cells would be known zeros).
    """
    hierarchy = dict(hierarchy or {})
    leaf_set = set(leaves)
    child_of: dict[Hashable, Hashable] = {}
    for parent, parts in hierarchy.items():
        if parent == TOTAL:
            raise ValueError(f"hierarchy of {name!r}: 'Total' is implicit and cannot be a declared parent")
        if parent in leaf_set:
            raise ValueError(f"hierarchy of {name!r}: {parent!r} is both a parent and a leaf in the data")
        if isinstance(parts, str) or not isinstance(parts, Sequence | set | frozenset | tuple | list):
            raise ValueError(f"hierarchy of {name!r}: the parts of {parent!r} must be a list of labels")
        for part in parts:
            if part in child_of and child_of[part] != parent:
                raise ValueError(
                    f"hierarchy of {name!r}: {part!r} has two parents ({child_of[part]!r} and {parent!r}); "
                    "non-nested hierarchies need a separate table")
            child_of[part] = parent
    # cycle check
    for node in child_of:
        seen = {node}
        p = child_of.get(node)
        while p is not None:
            if p in seen:
                raise ValueError(f"hierarchy of {name!r}: cycle through {p!r}")
            seen.add(p)
            p = child_of.get(p)

    # keep only parents with at least one leaf below them
    def leaf_below(node: Hashable, memo: dict[Hashable, bool]) -> bool:
        if node in memo:
            return memo[node]
        if node in leaf_set:
            memo[node] = True
            return True
        memo[node] = False
        res = any(leaf_below(p, memo) for p in hierarchy.get(node, ()))
        memo[node] = res
        return res

    memo: dict[Hashable, bool] = {}
    internal = [p for p in hierarchy if leaf_below(p, memo)]

    def depth(node: Hashable) -> int:
        d = 0
        p = child_of.get(node)
        while p is not None:
            d += 1
            p = child_of.get(p)
        return d

    declared = {node: i for i, node in enumerate(hierarchy)}  # (list(hierarchy).index per node: n² for n nodes)
    internal.sort(key=lambda n: (depth(n), declared[n]))
    labels: list[Hashable] = [TOTAL, *internal, *leaves]
    index = {lab: i for i, lab in enumerate(labels)}
    parent = np.full(len(labels), -1, dtype=np.int64)
    for lab, i in index.items():
        if i == 0:
            continue
        p = child_of.get(lab)
        parent[i] = index[p] if p is not None and p in index else 0
    children: dict[int, list[int]] = {}
    for i in range(1, len(labels)):
        children.setdefault(int(parent[i]), []).append(i)
    return Dimension(name, labels, parent, children, len(leaves), 1 + len(internal))


@dataclass
class TableModel:
    """All cells of a table and the relations between them.

    Attributes:
        dims: the dimension objects.
        codes: (cells, N) code index per dimension (0 = Total).
        inner: (cells,) index of the inner row for inner cells, -1 for margins.
        S: (cells, inner) 0/1 membership: a cell's value is the sum of its inner cells.
        M: (relations, cells) relation matrix with M·a = 0.
    """

    dims: list[Dimension]
    codes: np.ndarray
    inner: np.ndarray
    S: sp.csr_matrix
    M: sp.csr_matrix
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_cells(self) -> int:
        return len(self.inner)

    @property
    def is_inner(self) -> np.ndarray:
        return self.inner >= 0

    def labels_frame(self) -> pd.DataFrame:
        """The label of every cell in every dimension (``Total`` for grand margins)."""
        data = {}
        for d, dim in enumerate(self.dims):
            lab = np.asarray(dim.labels, dtype=object)
            data[dim.name] = lab[self.codes[:, d]]
        return pd.DataFrame(data)

    def key_of(self, codes: np.ndarray) -> np.ndarray:
        return _keys(codes, self.extra["radix"])

    def find(self, codes: np.ndarray) -> np.ndarray:
        """Cell index of each code row, -1 where that cell does not exist (known zero)."""
        keys = self.key_of(codes)
        sk = self.extra["sorted_keys"]
        pos = np.searchsorted(sk, keys)
        pos = np.minimum(pos, len(sk) - 1)
        ok = sk[pos] == keys
        return np.where(ok, self.extra["sorted_idx"][pos], -1)


def _keys(codes: np.ndarray, radix: np.ndarray) -> np.ndarray:
    return (codes.astype(np.int64) * radix[None, :]).sum(axis=1)


def build_model(inner_codes: list[np.ndarray], dims: list[Dimension]) -> TableModel:
    """Every cell with at least one contributing inner cell, and all relations.

    ``inner_codes[d]`` holds, for each inner row, its leaf position in dimension d.
    Inner cells come first (in input order), then margins in code order.
    """
    n_inner = len(inner_codes[0]) if inner_codes else 0
    N = len(dims)
    sizes = np.array([len(d.labels) for d in dims], dtype=np.int64)
    radix = np.ones(N, dtype=np.int64)
    for d in range(N - 2, -1, -1):
        radix[d] = radix[d + 1] * sizes[d + 1]
    if float(np.prod(sizes.astype(float))) > 2**62:
        raise ValueError("table too large: the code space exceeds 64-bit keys")

    # expand each inner cell to all its ancestor combinations
    rows = np.arange(n_inner, dtype=np.int64)
    key = np.zeros(n_inner, dtype=np.int64)
    code_cols: list[np.ndarray] = []
    for d, dim in enumerate(dims):
        ptr, anc = dim.ancestors()
        leaf = inner_codes[d][rows] if d > 0 else inner_codes[d]
        counts = ptr[leaf + 1] - ptr[leaf]
        starts = np.repeat(ptr[leaf], counts)
        offs = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        code_d = anc[starts + offs]
        rows = np.repeat(rows, counts)
        key = np.repeat(key, counts) + code_d * radix[d]
        code_cols = [np.repeat(c, counts) for c in code_cols]
        code_cols.append(code_d)

    inner_key = _keys(np.column_stack([dims[d].leaf_offset + inner_codes[d] for d in range(N)]), radix)
    all_keys = np.unique(key)
    margin_keys = np.setdiff1d(all_keys, inner_key, assume_unique=False)
    cell_keys = np.concatenate([inner_key, margin_keys])
    n_cells = len(cell_keys)
    order = np.argsort(cell_keys, kind="stable")
    sorted_keys = cell_keys[order]
    cell_of_pair = order[np.searchsorted(sorted_keys, key)]
    S = sp.csr_matrix((np.ones(len(key)), (cell_of_pair, rows)), shape=(n_cells, n_inner))
    S.sum_duplicates()
    S.data[:] = 1.0

    codes = np.zeros((n_cells, N), dtype=np.int64)
    rem = cell_keys.copy()
    for d in range(N):
        codes[:, d] = rem // radix[d]
        rem = rem % radix[d]
    inner_idx = np.full(n_cells, -1, dtype=np.int64)
    inner_idx[:n_inner] = np.arange(n_inner)

    model = TableModel(dims, codes, inner_idx, S, sp.csr_matrix((0, n_cells)))
    model.extra.update(radix=radix, sorted_keys=sorted_keys, sorted_idx=order)
    model.M = _relations(model)
    return model


def _relations(model: TableModel) -> sp.csr_matrix:
    """One row per (dimension, internal node, codes of the other dimensions)."""
    r_rows: list[np.ndarray] = []
    r_cols: list[np.ndarray] = []
    r_vals: list[np.ndarray] = []
    n_rel = 0
    for d, dim in enumerate(model.dims):
        if not dim.children:
            continue
        internal = np.array(sorted(dim.children), dtype=np.int64)
        tot_cells = np.flatnonzero(np.isin(model.codes[:, d], internal))
        if len(tot_cells) == 0:
            continue
        rel_ids = n_rel + np.arange(len(tot_cells))
        n_rel += len(tot_cells)
        r_rows.append(rel_ids)
        r_cols.append(tot_cells)
        r_vals.append(np.ones(len(tot_cells)))
        # children
        node_of = model.codes[tot_cells, d]
        for node in internal:
            sel = node_of == node
            if not sel.any():
                continue
            tc = tot_cells[sel]
            rid = rel_ids[sel]
            for child in dim.children[int(node)]:
                cc = model.codes[tc].copy()
                cc[:, d] = child
                found = model.find(cc)
                ok = found >= 0
                r_rows.append(rid[ok])
                r_cols.append(found[ok])
                r_vals.append(-np.ones(int(ok.sum())))
    if n_rel == 0:
        return sp.csr_matrix((0, model.n_cells))
    M = sp.csr_matrix((np.concatenate(r_vals), (np.concatenate(r_rows), np.concatenate(r_cols))),
                      shape=(n_rel, model.n_cells))
    M.sort_indices()
    return M


def merged_top(S: sp.csr_matrix, top: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest contributions of each cell from the union of its inner cells'.

    Inner cells of one cell are disjoint sets of units (each unit is classified once),
    so the largest contributions of a margin are the largest of its parts' lists.
    """
    coo = S.tocoo()
    width = top.shape[1]
    r = np.repeat(coo.row, width)
    v = top[coo.col].reshape(-1)
    v = np.where(np.isnan(v), -np.inf, v)
    order = np.lexsort((-v, r))
    r, v = r[order], v[order]
    start = np.searchsorted(r, np.arange(S.shape[0]))
    rank = np.arange(len(r)) - start[r]
    keep = rank < k
    out = np.full((S.shape[0], k), np.nan)
    out[r[keep], rank[keep]] = v[keep]
    out[np.isinf(out)] = np.nan
    return out
