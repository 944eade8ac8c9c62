"""A numeric label held by fewer than ``threshold`` units is drawn hidden (issue 23.5).

A household size of 12 held by one household identifies it even with its cell hidden: the
table was sent to ``review`` and drawn with the label beside its ✕. The label is now drawn as
the hidden marker in every mime type and in the reasons that name cells.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session


@pytest.fixture
def sess(humanitarian_session):
    return humanitarian_session


def _households() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    size = np.r_[rng.integers(1, 7, 200), 12]
    return pd.DataFrame({"hh_size": size, "region": rng.choice(["N", "S"], 201)})


def _everything(out) -> str:
    return out.data["text/plain"] + out.data["text/html"] + json.dumps(out.data["application/vnd.sdc-magic.v1+json"])


@pytest.mark.parametrize("build", [
    lambda df: df.groupby("hh_size").size(),
    lambda df: df.groupby(["region", "hh_size"]).size().unstack(fill_value=0),
    lambda df: pd.crosstab(df.hh_size, df.region),
], ids=["rows", "columns", "crosstab"])
def test_a_rare_household_size_is_not_drawn(sess: Session, build) -> None:
    out = sess.publish(build(_households()))
    assert out.metadata["sdc_magic"]["status"] in ("review", "blocked")
    assert not re.search(r"\b12\b", _everything(out)), re.findall(r".{30}\b12\b.{30}", _everything(out))[:3]


def test_common_sizes_stay_drawn(sess: Session) -> None:
    out = sess.publish(_households().groupby("hh_size").size())
    text = out.data["text/plain"]
    for size in ("2", "3", "4", "5", "6"):
        assert re.search(rf"^{size}\s", text, re.MULTILINE), text
