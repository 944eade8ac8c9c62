"""``audit.cell_components`` (the certificate splitter's own connected components) agrees with
scipy's graph search, numbering included, so certificates split into the same parts in the same
order as before it replaced ``scipy.sparse.csgraph`` (an import that cost a first display 0.1 s)."""

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from sdc_magic.protect.audit import cell_components


def _reference(B: sp.csr_matrix) -> np.ndarray:
    rows = np.flatnonzero(np.diff(B.indptr) > 0)
    Bn = B[rows]
    graph = sp.bmat([[None, Bn], [Bn.T, None]], format="csr") if len(rows) else sp.csr_matrix((B.shape[1],) * 2)
    _, lab = connected_components(graph, directed=False)
    _, ranked = np.unique(lab[len(rows):], return_inverse=True)
    return ranked


def test_components_match_a_graph_search_on_random_relations():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n_rel, n_cells = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        B = sp.random(n_rel, n_cells, density=rng.uniform(0.02, 0.3), random_state=int(rng.integers(1e9)),
                      format="csr")
        assert np.array_equal(cell_components(B.indptr, B.indices, n_cells), _reference(B))


def test_a_long_chain_is_one_component():
    n = 500
    rows, cols = np.repeat(np.arange(n - 1), 2), np.stack([np.arange(n - 1), np.arange(1, n)], axis=1).ravel()
    B = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n - 1, n))
    assert set(cell_components(B.indptr, B.indices, n).tolist()) == {0}
