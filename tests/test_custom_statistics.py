"""The analyst's own statistics are judged by what they follow (issue 23.6).

``apply(lambda s: s.sort_values().iloc[-1])`` is the oldest person of each group and
``agg(lambda s: s.sum() - s.max())`` beside the sum is the largest contribution; as "custom"
statistics they were judged by group sizes only and shown at ``review``. The capture now moves
the largest, smallest and middle values of a few groups and computes the function again
(``sdc_magic/capture/custom_stats.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.capture.custom_stats import TOTAL_LESS_ONE, probe_statistic
from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"region": rng.choice(list("NSEW"), 400), "age": rng.integers(0, 90, 400),
                       "income": rng.lognormal(8, 1, 400)})
    df.loc[5, "age"] = 101
    return df


DF = _people()
IDS = DF.groupby("region").ngroup().to_numpy()


@pytest.mark.parametrize(("fn", "expected"), [
    (lambda s: s.sort_values().iloc[-1], "max"),
    (lambda s: s.nlargest(1).iloc[0], "max"),
    (lambda s: np.sort(s.to_numpy())[0], "min"),
    (lambda s: s.sort_values().iloc[len(s) // 2], "median"),
    (lambda s: s.iloc[0], "first"),
    (lambda s: s.iloc[-1], "first"),
    (lambda s: s.sum() - s.max(), TOTAL_LESS_ONE),
    (lambda s: s.max() - s.mean(), TOTAL_LESS_ONE),
    (lambda s: s.sum() - s.min(), TOTAL_LESS_ONE),
    (lambda s: s.mean() * 2, None),
    (lambda s: s.sum(), None),
    (lambda s: s.std(), None),
    (lambda s: s.quantile(0.9), None),
    (lambda s: (s > 50).sum(), None),
], ids=["sort iloc[-1]", "nlargest iloc", "np.sort [0]", "middle", "first row", "last row", "sum - max", "max - mean", "sum - min",
        "2 x mean", "sum", "std", "q90", "count over 50"])
def test_what_a_function_follows(fn, expected) -> None:
    assert probe_statistic(fn, DF.age, IDS) == expected


def test_a_function_that_fails_or_prints_stays_custom(capsys: pytest.CaptureFixture[str]) -> None:
    def noisy(s: pd.Series) -> float:
        print("computing", len(s))
        return float(s.max())

    assert probe_statistic(noisy, DF.age, IDS) == "max"
    assert capsys.readouterr().out == ""  # the probes' printing is silenced
    assert probe_statistic(lambda s: 1 / 0, DF.age, IDS) is None
    assert probe_statistic(lambda s: "text", DF.age, IDS) is None


@pytest.fixture(params=["humanitarian", "insee"])
def sess(request):
    s = Session(rules=preset(request.param))
    s.capture.install()
    yield s
    s.capture.uninstall()


@pytest.mark.parametrize("build", [
    lambda d: d.groupby("region").age.apply(lambda s: s.sort_values().iloc[-1]),
    lambda d: d.groupby("region").age.agg(lambda s: s.sum() - s.max()),
    lambda d: d.groupby("region").income.agg(lambda s: s.sum() - s.max()),
    lambda d: d.groupby("region").agg(oldest=("age", lambda s: s.nlargest(1).iloc[0])),
    lambda d: d.groupby("region").agg({"age": lambda s: s.max() - s.mean()}),
], ids=["oldest", "age sum - max", "income sum - max", "named nlargest", "dict max - mean"])
def test_one_persons_value_is_never_drawn(sess: Session, build) -> None:
    out = sess.publish(build(DF))
    shown = protected_frame(out.checked)
    values = [v for v in np.ravel(shown.to_numpy()) if v != X]
    assert values == [] or out.metadata["sdc_magic"]["status"] == "blocked"
    assert "101" not in out.data["text/plain"]
    assert any("moves with" in n for n in out.checked.notes)


def test_an_ordinary_own_function_is_still_custom(sess: Session) -> None:
    out = sess.publish(DF.groupby("region").age.agg(lambda s: s.mean() * 2))
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert out.checked.reason_summary() == {"custom": 4}
