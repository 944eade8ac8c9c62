"""Evidence memory is bounded (issue 12, item 3).

Before: 1,000 captures on a 1M-row frame grew the kernel by 7.6 GB (groupby sum) to 78 GB
(crosstab): every captured GroupBy child was held strongly (with its cached group ids),
and every crosstab entry kept a private copy of its input. Now a budget in MB bounds the
registry (least recently used evicted first), and an evicted result is checked as
unverified: never shown raw.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pandas.api.typing import SeriesGroupBy

from sdc_magic.config import preset
from sdc_magic.evidence.registry import HeldSource, Registry, default_budget_mb
from sdc_magic.jupyter.session import Session


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


@pytest.fixture
def frame() -> pd.DataFrame:
    n = 200_000
    rng = np.random.default_rng(7)
    return pd.DataFrame({"k": rng.integers(0, 20, n),
                         "j": np.array([f"j{i}" for i in range(10)], dtype=object)[rng.integers(0, 10, n)],
                         "v": rng.lognormal(size=n)})


@pytest.fixture
def small_session() -> Any:
    s = Session(rules=preset("humanitarian"))
    s.registry.budget_mb = 16
    s.capture.install()
    yield s
    s.capture.uninstall()


CALLS = {
    "groupby sum": lambda df: df.groupby("k")["v"].sum(),
    "groupby 2 keys mean": lambda df: df.groupby(["k", "j"])["v"].mean(),
    "crosstab": lambda df: pd.crosstab(df["k"], df["j"]),
    "pivot_table": lambda df: df.pivot_table(index="k", columns="j", values="v", aggfunc="sum"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_repeated_captures_stay_within_the_budget(small_session: Any, frame: pd.DataFrame, name: str) -> None:
    call = CALLS[name]
    call(frame)
    gc.collect()
    before = _rss_mb()
    for _ in range(25):
        call(frame)
    gc.collect()
    grown = _rss_mb() - before
    registry = small_session.registry
    assert registry.nbytes <= 16e6
    # crosstab used to add 13 MB per call at this size (a private copy per entry): 325 MB here
    assert grown < 80, f"{name}: RSS grew {grown:.0f} MB over 25 calls"
    # no GroupBy (each caching 1.6 MB of group ids here) outlives its call
    alive = sum(isinstance(o, SeriesGroupBy) for o in gc.get_objects())
    assert alive <= 2, alive


def test_a_private_copy_is_freed_but_its_result_stays_verified(small_session: Any, frame: pd.DataFrame) -> None:
    first = pd.crosstab(frame["k"], frame["j"])
    entry = small_session.registry.by_object(first)
    assert isinstance(entry.source, HeldSource) and isinstance(entry.source.frame, pd.DataFrame)
    for _ in range(6):
        pd.crosstab(frame["j"], frame["k"])
    gc.collect()
    assert entry.source.frame is None  # crosstab's private copy left the budget and was freed
    checked = small_session.check(first)
    assert checked.entry is entry  # the evidence itself is kept: still verified


def test_a_frame_the_analyst_holds_stays_reachable(small_session: Any, frame: pd.DataFrame) -> None:
    first = frame.groupby(["k", "j"]).size()
    entry = small_session.registry.by_object(first)
    for _ in range(6):
        frame.groupby("j")["v"].mean()
    assert entry.source.frame is frame  # held weakly: no copy, no cost, still there for suggestions
    assert small_session.registry.nbytes <= 16e6


def test_evicted_results_are_unverified_never_raw() -> None:
    s = Session(rules=preset("humanitarian"))
    s.registry.budget_mb = 0.001  # only the newest entry fits
    s.capture.install()
    try:
        df = pd.DataFrame({"g": ["a"] * 2 + ["b"] * 30 + ["c"] * 40, "v": np.linspace(1.13, 9.71, 72)})
        counts = df.groupby("g").size()
        means = df.groupby("g")["v"].mean()
        for _ in range(3):
            df.groupby("g")["v"].max()
        assert s.registry.evicted >= 2 and s.registry.by_object(counts) is None
        shown = s.publish(counts)
        meta = shown.metadata["sdc_magic"]
        assert shown.checked.entry is None and meta["hidden"] >= 1  # checked as counts: the 2 is hidden
        assert " 2\n" not in shown.data["text/plain"] + "\n"
        shown = s.publish(means)
        assert shown.metadata["sdc_magic"]["status"] == "review"  # unverified numbers: never exportable
        assert shown.checked is not None, s.last_error
        assert shown.checked.entry is None
        # marked unverified ('?'), or hidden where the captured max table it shares labels with
        # hides its cells (a table without evidence inherits them: sdc_magic/derived.py)
        text = shown.data["text/plain"]
        assert "?" in text or text.count("✕") == 3
        assert "1.19" not in text and "3.12" not in text
    finally:
        s.capture.uninstall()


def test_budget_from_configuration_and_environment(shell: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.jupyter import extension, kernel

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    monkeypatch.setattr(kernel, "_session", None)
    (tmp_path / "sdc.toml").write_text('preset = "insee"\nmemory_mb = 64\n')
    assert extension.session().registry.budget_mb == 64
    assert extension.session().rules.preset == "insee"
    monkeypatch.setenv("SDC_MAGIC_MEMORY_MB", "12.5")
    assert Registry().budget_mb == 12.5 == default_budget_mb()
    monkeypatch.setenv("SDC_MAGIC_MEMORY_MB", "nan")
    assert default_budget_mb() == 256
