"""sdc_magic: statistical disclosure control for every pandas table displayed in Jupyter.

``%load_ext sdc_magic`` once, then write plain pandas. See the README for the rules,
the threat model and the limits. Heavy imports are deferred so that importing the
package (e.g. by a Jupyter server) stays cheap.
"""

from __future__ import annotations

from typing import Any

from .config import PRESETS, Rules, RulesError, preset

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "Rules",
    "RulesError",
    "__version__",
    "load_ipython_extension",
    "preset",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%load_ext sdc_magic``."""
    from .extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%unload_ext sdc_magic``: restores pandas and IPython exactly."""
    from .extension import unload

    unload(ipython)
