"""The progress line in words an analyst reads, with one percentage that only goes up.

Why: the protection engine reports its stages in its own terms ("audit: finding
certificates", "checking what single contributors know"), and each stage's fraction
starts again from 0, so the line read "60 %" then "5 %" (issue 24.6). Each engine stage
is given plain words and a share of the whole; the audits that run *inside* a stage (every
clean-up trial is audited) keep the words and share of the stage around them. The shown
percentage is the largest reached so far. Time may be shown; it never decides anything.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (engine message prefix, words, start, end): the stages in the order a protection runs them.
STAGES: tuple[tuple[str, str, float, float], ...] = (
    ("protect: building the table model", "preparing the table", 0.00, 0.02),
    ("protect: pattern of an earlier run", "checking the cells hidden by an earlier run", 0.02, 0.80),
    ("protect: choosing secondary cells", "choosing other cells to hide, so that small ones cannot be worked out",
     0.02, 0.35),
    ("protect: removing unneeded secondary cells", "showing again the cells that need not be hidden", 0.35, 0.75),
    ("optimal:", "looking for a pattern that hides less", 0.75, 0.85),
    ("audit: final check", "checking that no hidden cell can be worked out from the others", 0.85, 0.90),
    ("audit: computing intervals", "working out how far each hidden cell could be from its value", 0.90, 0.99),
    ("protect: done", "done", 1.00, 1.00),
)
#: Messages of the audit that runs inside a stage: the stage around them keeps the line.
INNER = ("audit: finding certificates", "audit: checking what single contributors know")


@dataclass
class ProgressWords:
    """The state of one progress line: the current stage and the share shown so far."""

    words: str = "preparing the table"
    start: float = 0.0
    end: float = 0.02
    shown: float = 0.0

    def update(self, message: str, fraction: float | None) -> tuple[str, float]:
        """(words, overall share) for an engine message and its stage fraction."""
        if message.startswith(INNER):
            fraction = None  # the inner audit's own fraction says nothing about the stage
        else:
            for prefix, words, start, end in STAGES:
                if message.startswith(prefix):
                    if (start, end) != (self.start, self.end):
                        self.words, self.start, self.end = words, start, end
                    break
            else:
                fraction = None  # an unknown message: keep the line as it is
        share = self.start if fraction is None else self.start + (self.end - self.start) * min(max(fraction, 0.0), 1.0)
        self.shown = max(self.shown, share)
        return self.words, self.shown
