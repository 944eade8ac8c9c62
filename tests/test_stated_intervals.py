"""The intervals an output states for its hidden cells follow from what it publishes.

Red team of stop 50 (helper-50, 02): the protection assumes every margin known (a stronger
attacker), and the display stated its intervals: "somewhere between 0 and 17" for B's and C's
hidden women beside A's 20 told the women's total (37) on screen, in the HTML, in the product's
mime type, the ledger and the redacted copy; with a later cleared table of everyone outside C
(35/35), C's 2 women and 1 man. On a table of means every hidden mean said "between 0 and
483.8", the bound of B's and C's total income. The certificate already stated what the published
cells allow. Now a table whose protection model holds margins it does not show states no
interval, and neither does a cell that is not a count or a sum.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

X = "✕"


def _intervals(out: Any) -> list[Any]:
    meta = out.metadata["sdc_magic"]
    return [r.get("interval") for r in meta["reasons"] if r.get("hidden")]


def _everything(out: Any) -> str:
    return json.dumps({k: v for k, v in out.data.items()}, default=str) + json.dumps(out.metadata, default=str)


def test_a_table_without_its_margins_states_no_interval(sess: Any, df: pd.DataFrame) -> None:
    out = sess.publish(df.groupby(["district", "sex"]).size())
    assert out.data["text/plain"].count(X) == 4
    assert not any(_intervals(out))
    assert "somewhere between" not in _everything(out)
    assert "17" not in out.data["text/plain"].split("\nsdc_magic:")[0]


def test_a_table_of_means_states_no_interval(sess: Any, df: pd.DataFrame) -> None:
    out = sess.publish(df.groupby(["district", "sex"]).income.mean())
    assert X in out.data["text/plain"]
    assert "483.8" not in _everything(out)
    assert not any(_intervals(out))


def test_a_table_showing_its_margins_still_states_them(sess: Any, df: pd.DataFrame) -> None:
    # (the margins are published: the intervals they give tell nothing more)
    out = sess.publish(pd.crosstab(df.district, df.sex, margins=True))
    stated = [iv for iv in _intervals(out) if iv]
    assert len(stated) == 6 and [0.0, 17.0] in stated
    assert "somewhere between 0 and 17" in out.data["text/html"]


def test_the_record_states_no_interval_either(sess: Any, df: pd.DataFrame) -> None:
    out = sess.publish(df.groupby(["district", "sex"]).size())
    assert out.checked.intervals == {} and out.checked.intervals_withheld
    from sdc_magic.protect import certificate

    cert = certificate.build("out-1", out.checked, "out-1.csv", "digest")
    assert all("interval" not in item for item in cert["hidden"])
    assert out.checked.intervals == {}  # (building the certificate does not put them back)
