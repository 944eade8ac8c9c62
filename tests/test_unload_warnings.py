"""``%unload_ext`` takes out the warnings filters the extension's own work installed.

Red team 53b (15): after ``%unload_ext sdc_magic`` pandas was restored exactly, but one warnings
filter stayed: scipy.sparse, imported lazily with the solvers during a check, ignores "the matrix
subclass is not the recommended way" from then on. Filters installed during the extension's own
work are noted and removed on unload; the user's own filters stay.
"""

from __future__ import annotations

import warnings
from typing import Any


def test_filters_from_the_extensions_work_go_and_the_users_stay(ipython: Any) -> None:
    from sdc_magic.jupyter.session import internal_work

    ipython.run_line_magic("load_ext", "sdc_magic")
    try:
        before = list(warnings.filters)
        with internal_work():  # (as a library imported lazily during a check installs one)
            warnings.filterwarnings("ignore", message="a library's side effect")
        warnings.filterwarnings("ignore", message="the analyst's own")
    finally:
        ipython.run_line_magic("unload_ext", "sdc_magic")
    messages = [f[1].pattern for f in warnings.filters if f[1] is not None]
    assert "a library's side effect" not in messages
    assert "the analyst's own" in messages
    warnings.filters.remove(next(f for f in warnings.filters if f[1] is not None
                                 and f[1].pattern == "the analyst's own"))
    assert list(warnings.filters) == before
