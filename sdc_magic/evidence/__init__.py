"""What the engines tell us about a table, in one engine-neutral form (stage 1 of the flow).

* :mod:`.flatten`: a table → one entry per cell with a layout-free key (dims by name + measure);
* :mod:`.facts`: per-group facts from integer group ids (distinct units, totals, top-k per unit);
* :mod:`.registry`: the store of captured entries (bounded in MB) and matching a displayed
  object back to the entry it came from.

Everything above reads these structures; nothing here knows an engine, a rule or Jupyter.
"""
