"""A label holding a right-to-left override cannot reverse the explanations (issue 24.5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.outputs.render import visible_bidi_controls

RLO = "\u202e"


def test_controls_are_shown_not_obeyed() -> None:
    assert visible_bidi_controls(f"Z{RLO}abc") == "Z⟨U+202E⟩abc"
    assert visible_bidi_controls("\u200fعربي") == "\u200fعربي"  # right-to-left marks of real text stay


def test_no_output_carries_an_active_override(session) -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"district": rng.choice(["A", "B", f"evil{RLO}x"], 200, p=[0.5, 0.49, 0.01]),
                       "sex": rng.choice(["F", "M"], 200)})
    out = session.publish(pd.crosstab(df.district, df.sex))
    assert out.checked.hidden.any()
    for mime in ("text/plain", "text/html"):
        assert RLO not in out.data[mime]
        assert "⟨U+202E⟩" in out.data[mime]
