"""JSON-ready certificate of a protected row-level frame (k-anonymity, suppressions, risk, noise).

Why: the export step (outside this package) attaches this dict to an exported
row-level frame, so a reviewer sees what was checked without rerunning anything: the
quasi-identifiers and k, violations after protection, suppressions per variable, the
re-identification risk per event type, and the noise level.

The noise seed is *withheld by default*: whoever holds the seed and the code can
regenerate every noise draw and undo the date noise, so a certificate that travels
with the data must not carry it. ``include_seed=True`` is for the data owner's own
audit records only.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .kanon import CONVENTION, KAnonymityReport
from .noise import NoiseResult
from .risk import RiskReport
from .suppress import SuppressionReport

__all__ = ["SCHEMA", "certificate"]

SCHEMA = "sdc_magic.microdata/1"
SOURCE = ("Sequential date noise, first/last states, k-anonymity with local suppression and "
          "distance-based matching risk, after the HDSS longitudinal anonymisation article "
          "(JMIR Public Health and Surveillance); wildcard convention of sdcMicro freqCalc")


def certificate(kanon: KAnonymityReport | None = None, suppression: SuppressionReport | None = None,
                risk: RiskReport | None = None, noise: NoiseResult | None = None, *,
                include_seed: bool = False) -> dict[str, Any]:
    """Assemble the reports into one JSON-serialisable dict (plain str/int/float/bool/list/dict).

    ``kanon`` should be the check of the *protected* frame; when only ``suppression``
    is given its own re-check is used. Raises if the two disagree on keys or k.
    """
    if kanon is None and suppression is None:
        raise ValueError("a certificate needs a k-anonymity check or a suppression report")
    if kanon is not None and suppression is not None:
        if tuple(kanon.keys) != tuple(suppression.keys) or kanon.k != suppression.k:
            raise ValueError("the k-anonymity check and the suppression report use different keys or k")
    keys = list((kanon or suppression).keys)  # type: ignore[union-attr]
    k = (kanon or suppression).k  # type: ignore[union-attr]
    violations = kanon.n_violations if kanon is not None else suppression.violations_after  # type: ignore[union-attr]
    cert: dict[str, Any] = {
        "schema": SCHEMA,
        "source": SOURCE,
        "k": int(k),
        "keys": keys,
        "convention": CONVENTION,
        "n_records": int((kanon or suppression).n_records),  # type: ignore[union-attr]
        "violations_after": int(violations),
        "k_anonymous": int(violations) == 0,
    }
    if kanon is not None and kanon.sensitive is not None:
        cert["l_diversity"] = {"sensitive": kanon.sensitive, "l": kanon.l,
                               "violations": int(kanon.l_violating.sum())}
    if suppression is not None:
        cert["suppressions"] = {key: int(v) for key, v in suppression.suppressed.items()}
        cert["suppressions_percent"] = {key: float(v) for key, v in suppression.percent.items()}
        cert["suppressions_total"] = suppression.total
        cert["importance"] = {key: int(v) for key, v in suppression.importance.items()}
    if risk is not None:
        cert["risk"] = risk.summary()
    if noise is not None:
        cert["noise"] = noise.level.as_dict()
        cert["noise"]["reduced_share"] = noise.summary()["reduced_share"]
        if include_seed:
            cert["seed"] = noise.seed
        else:
            cert["seed"] = None
            cert["seed_withheld"] = "the noise seed is kept by the data owner: it would let anyone undo the noise"
            if noise.seed is not None and int(noise.seed).bit_length() > 64:
                # a fingerprint only for high-entropy seeds: a small seed could be found by trying them all
                cert["seed_sha256"] = hashlib.sha256(str(int(noise.seed)).encode()).hexdigest()
    return cert
