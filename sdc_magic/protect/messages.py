"""Words of the protection's messages that other stages look for (no solver imported here).

The session recognises a table no pattern can protect by its message (``Session._link``: such
a table is protected again on its own, then audited with the earlier outputs); the message is
written by :func:`.api.protect`. One constant for both, found anywhere in a note: a table of
several measures joins their messages with "; ", and the one that matters need not come first.
"""

from __future__ import annotations

#: How the message of a table no pattern can protect begins.
UNPROTECTABLE = "No suppression pattern can protect"
