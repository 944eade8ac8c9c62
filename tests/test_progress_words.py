"""The progress line (issue 24.6): plain words, one percentage that only goes up, whatever the
engine's stages report; a real protection's messages give a line an analyst can read."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sdc_magic.config import Rules
from sdc_magic.jupyter.progress_words import STAGES, ProgressWords
from sdc_magic.protect import protect

JARGON = ("certificate", "single contributor", "secondary", "audit", "master problem", "pattern of")


def _lines_of_a_real_protection() -> list[tuple[str, float]]:
    rng = np.random.default_rng(4)
    shape = (12, 9, 3)
    n = rng.negative_binomial(2, 0.25, size=shape)
    idx = np.indices(shape).reshape(3, -1)
    df = pd.DataFrame({"d0": idx[0], "d1": idx[1], "d2": idx[2], "n": n.ravel()})
    messages: list[tuple[str, float | None]] = []
    protect(df[df.n > 0], dims=["d0", "d1", "d2"], value="n", rules=Rules(threshold=5),
            progress=lambda m, f=None: messages.append((m, f)))
    state = ProgressWords()
    return [state.update(m, f) for m, f in messages], messages


def test_a_real_protection_reads_in_plain_words_and_its_share_never_goes_back() -> None:
    lines, messages = _lines_of_a_real_protection()
    # (the engine paces its messages by the clock, so how many arrive varies: the inner audits'
    # words are tested message by message below)
    assert len(messages) >= 2
    shares = [share for _, share in lines]
    assert shares == sorted(shares)
    assert shares[0] >= 0.0 and shares[-1] == 1.0
    for words, _ in lines:
        assert not any(j in words for j in JARGON), words
    # (the engine paces its messages by the clock: which ones arrive varies, their words do not)
    assert {w for w, _ in lines} <= {words for _, words, _, _ in STAGES}
    assert lines[-1] == ("done", 1.0)


def test_an_inner_audit_keeps_the_stage_and_its_share() -> None:
    state = ProgressWords()
    state.update("protect: removing unneeded secondary cells", 0.5)
    words, share = state.update("audit: finding certificates", 0.1)
    assert words == "showing again the cells that need not be hidden"
    assert share == 0.55
    words, share = state.update("audit: checking what single contributors know", 0.9)
    assert share == 0.55


def test_stages_are_ordered_and_every_engine_message_has_words() -> None:
    import pathlib

    ends = [end for _, _, _, end in STAGES]
    assert ends[-1] == 1.0
    root = pathlib.Path(__file__).resolve().parents[1] / "sdc_magic"
    sent = set()
    for path in root.rglob("*.py"):
        sent |= set(re.findall(r'(?:tick|progress)\(\s*f?"([a-z]+: [^"{]+)', path.read_text()))
    known = tuple(p for p, _, _, _ in STAGES) + ("audit: finding certificates",
                                                 "audit: checking what single contributors know")
    assert sent and all(m.startswith(known) for m in sent), sorted(m for m in sent if not m.startswith(known))


def test_the_progress_display_shows_the_words(monkeypatch) -> None:
    from sdc_magic.jupyter import extension

    shown: list[dict] = []
    monkeypatch.setattr("IPython.display.display", lambda data, **k: shown.append(data))
    monkeypatch.setattr("IPython.display.update_display", lambda data, **k: shown.append(data))
    progress = extension._Progress(enabled=True, delay=0.0, every=0.0)
    progress("protect: choosing secondary cells", 0.5)
    progress("audit: finding certificates", 0.0)
    texts = [d["text/plain"] for d in shown]
    assert texts[0].startswith("sdc_magic: protecting… 18%: choosing other cells to hide")
    assert "certificates" not in texts[1] and "18%" in texts[1]
