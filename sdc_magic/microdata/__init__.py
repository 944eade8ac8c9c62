"""Row-level (microdata) protection: k-anonymity, local suppression, date noise, risk, utility.

Pure data-in/data-out functions (issue 7), reimplemented from the published methods of
the HDSS longitudinal anonymisation article and sdcMicro's documented conventions:

* :func:`check_k_anonymity` -- classes over quasi-identifiers, missing values match anything;
* :func:`recode_proposals`, :func:`local_suppression` -- global recoding options, then the
  fewest suppressions to reach k-anonymity (re-checked);
* :func:`add_date_noise` / :func:`date_noise` -- per-person order-preserving noise on event dates;
* :func:`first_last_states`, :func:`person_table` -- long <-> wide reshaping for k-anonymity;
* :func:`match_risk` -- distance-based re-identification risk per event type;
* :func:`utility_summary` -- in->out migration spans and a chi-square table comparison;
* :func:`certificate` -- a JSON-ready record for the export step;
* :func:`make_hdss` -- synthetic HDSS-like data.

No function modifies its input frames.
"""

from __future__ import annotations

from .certificate import certificate
from .kanon import CONVENTION, KAnonymityReport, check_k_anonymity
from .noise import NOISE_LEVELS, NoiseLevel, NoiseResult, add_date_noise, date_noise, sequential_noise
from .recode import RecodeProposal, apply_recodes, proposals_frame, recode_proposals
from .reshape import broadcast_person_columns, first_last_states, person_table
from .risk import RiskReport, match_risk
from .suppress import SuppressionReport, local_suppression, suppress_cells
from .synth import EDUCATION, EVENT_KINDS, OCCUPATION, make_hdss
from .utility import chi_square_comparison, in_out_spans, utility_summary

__all__ = [
    "CONVENTION",
    "EDUCATION",
    "EVENT_KINDS",
    "NOISE_LEVELS",
    "OCCUPATION",
    "KAnonymityReport",
    "NoiseLevel",
    "NoiseResult",
    "RecodeProposal",
    "RiskReport",
    "SuppressionReport",
    "add_date_noise",
    "apply_recodes",
    "broadcast_person_columns",
    "certificate",
    "check_k_anonymity",
    "chi_square_comparison",
    "date_noise",
    "first_last_states",
    "in_out_spans",
    "local_suppression",
    "make_hdss",
    "match_risk",
    "person_table",
    "proposals_frame",
    "recode_proposals",
    "sequential_noise",
    "suppress_cells",
    "utility_summary",
]
