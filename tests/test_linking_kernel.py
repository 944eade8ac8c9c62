"""Linking classes of issue 10 executed in real kernels (nbclient): differencing after
``reset_index``, overlapping ``pd.cut`` bands, a filtered region against a sum of published
districts, ``describe`` and array-key totals, and a kernel restart between two outputs.

Every mime type of every output is scanned: a value the linking hides is never published,
and no message names a cell by an internal index.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _nbutil import HIDDEN, execute_notebook, text_of
from linking_tables import REGIONS

pytestmark = pytest.mark.notebook

SETUP = f"""\
import numpy as np
import pandas as pd
from sdc_magic.datasets import make_referrals
d = make_referrals().assign(region=lambda f: f["admin2"].map({REGIONS!r}))
"""

FIRST = [
    "%load_ext sdc_magic",
    SETUP,
    'd.groupby(["sex", "age_band"]).size().unstack()',
    'd[d["admin2"] != "Mirebalais"].reset_index(drop=True).groupby(["sex", "age_band"]).size().unstack()',
    'd.groupby(pd.cut(d["age"], [59, 120]), observed=True).size()',
    'd.groupby(pd.cut(d["age"], [60, 120]), observed=True).size()',
    'd.groupby("admin2").size()',
    'kept = d[~d["case_id"].isin(d[d["region"] == "Centre"]["case_id"].head(2))]\nkept.groupby("region").size()',
    'd["age"].describe()',
    'few = d[d["age"] != 91]\nfew.groupby(np.zeros(len(few))).size()',
    'd.groupby("sex").size()',
]
SECOND = [
    "%load_ext sdc_magic",
    SETUP,
    'again = d[d["age"] != 91].reset_index(drop=True)\nagain.groupby("sex").size()',
]
INTERNAL = re.compile(r"out-\d+:\d+")


def _outputs(nb: dict[str, Any], index: int) -> list[dict[str, Any]]:
    return [o for o in nb["cells"][index]["outputs"] if o["output_type"] in ("display_data", "execute_result")]


def _everything(outputs: list[dict[str, Any]]) -> str:
    parts = []
    for out in outputs:
        for mime, value in out.get("data", {}).items():
            parts.append(value if isinstance(value, str) and mime.startswith("text/") else
                         text_of(value) if isinstance(value, list) else json.dumps(value))
        parts.append(json.dumps(out.get("metadata", {})))
    return "\n".join(parts)


def _meta(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    metas = [o["metadata"]["sdc_magic"] for o in outputs if "sdc_magic" in o.get("metadata", {})]
    assert len(metas) == 1, outputs
    return metas[0]


def _hidden_rules(meta: dict[str, Any]) -> dict[str, set[str]]:
    return {" / ".join(c for c in r["cell"] if c != "None"): {x["rule"] for x in r["reasons"]}
            for r in meta["reasons"] if r["hidden"]}


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("linking-kernel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JPY_SESSION_NAME", "analysis.ipynb")  # as the server names the notebook to its kernel
        _, first = execute_notebook(FIRST, workdir, name="first.ipynb")
        _, second = execute_notebook(SECOND, workdir, name="second.ipynb")  # a new kernel: a restart
    return first, second


@pytest.fixture(scope="module")
def truth() -> pd.DataFrame:
    from sdc_magic.datasets import make_referrals

    return make_referrals().assign(region=lambda f: f["admin2"].map(REGIONS))


def test_no_internal_indices_and_no_errors(executed) -> None:
    for nb in executed:
        for cell in nb["cells"]:
            for out in cell["outputs"]:
                assert out["output_type"] != "error", out
            text = _everything(cell["outputs"])
            assert not INTERNAL.search(text), text_of(cell["source"])


def test_reset_index_differencing_in_a_kernel(executed, truth) -> None:
    first, _ = executed
    meta = _meta(_outputs(first, 3))
    hidden = _hidden_rules(meta)
    assert "differencing" in hidden["F / 0-11"]
    out = truth[truth["admin2"] != "Mirebalais"].groupby(["sex", "age_band"]).size().unstack()
    page = next(o["data"]["text/html"] for o in _outputs(first, 3) if "text/html" in o.get("data", {}))
    rows = re.findall(r"<tr>(.*?)</tr>", text_of(page), flags=re.S)
    girls = next(r for r in rows if re.search(r"<th>F</th>", r))
    cells = re.findall(r"<td[^>]*>(.*?)</td>", girls)
    assert HIDDEN in cells[list(out.columns).index("0-11")]


@pytest.mark.parametrize("index,value_of", [
    (5, lambda t: int((t["age"] > 60).sum())),  # (60, 120] after (59, 120]
    (9, lambda t: int((t["age"] != 91).sum())),  # the total of everyone but the 91-year-olds
])
def test_single_cell_outputs_never_publish_the_value(executed, truth, index, value_of) -> None:
    first, _ = executed
    outputs = _outputs(first, index)
    meta = _meta(outputs)
    assert meta["hidden"] == 1 and "differencing" in next(iter(_hidden_rules(meta).values()))
    value = value_of(truth)
    assert not re.search(rf"(?<![\d.]){value}(?![\d.])", _everything(outputs).replace(meta["digest"], ""))


def test_region_against_sum_of_districts_in_a_kernel(executed) -> None:
    first, _ = executed
    meta = _meta(_outputs(first, 7))
    assert "differencing" in _hidden_rules(meta)["Centre"]
    assert any("Mirebalais + Saint-Marc" in x["message"] for r in meta["reasons"] for x in r["reasons"])


def test_restart_keeps_the_linking(executed, truth) -> None:
    _, second = executed
    outputs = _outputs(second, 2)
    meta = _meta(outputs)
    hidden = _hidden_rules(meta)
    assert set(hidden) == {"F", "M"} and all("differencing" in r for r in hidden.values())
    messages = [x["message"] for r in meta["reasons"] for x in r["reasons"]]
    assert any(re.search(r"\(out-\d+\)", m) for m in messages)  # names an output of the first kernel
    counts = truth[truth["age"] != 91].groupby("sex").size()
    text = _everything(outputs).replace(meta["digest"], "")
    for value in counts:
        assert not re.search(rf"(?<![\d.]){value}(?![\d.])", text), value


def test_only_table_mime_types(executed) -> None:
    allowed = {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json",
               "application/vnd.sdc-magic.v1+json"}
    for nb in executed:
        for cell in nb["cells"]:
            for out in _outputs({"cells": [cell]}, 0):
                if "sdc_magic" in out.get("metadata", {}):
                    assert set(out["data"]) <= allowed, set(out["data"])


def test_workdir_keeps_linking_beside_the_ledger(executed, tmp_path_factory) -> None:
    del executed
    roots = list(Path(tmp_path_factory.getbasetemp()).glob("linking-kernel*/.sdc_magic"))
    assert roots and any(p.name.endswith(".linking.npz") for root in roots for p in root.iterdir())
