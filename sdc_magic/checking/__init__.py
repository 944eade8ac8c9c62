"""From a displayed object to a decision: resolve → primary rules → protection → :class:`Checked`.

* :mod:`.resolve`: a displayed object → its captured evidence, or row-level / unverified;
* :mod:`.check`: the pipeline: primary rules per cell, label and order disclosure, secondary
  protection per additive measure, the one final decision;
* :mod:`.derived`: hidden cells a table without evidence inherits from the captured table
  it was computed from.
"""
