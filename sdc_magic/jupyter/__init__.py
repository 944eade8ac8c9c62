"""The top of the flow: the kernel session and everything that talks to Jupyter.

* :mod:`.session`: rules in force, capture, check, linking, render, ledger for one kernel;
* :mod:`.extension`: display formatters, text/plain printer, print warning, load/unload;
* :mod:`.magics`: ``%sdc``; :mod:`.comm`: the lab extension's actions (comm target ``sdc_magic``);
* :mod:`.failsafe`: every table withheld when loading fails; :mod:`.tracebacks`: message-free
  tracebacks;
* :mod:`.server`: Jupyter server routes; :mod:`.notebooks`, :mod:`.cli`: headless runs and
  the ``sdc-magic`` command.

Nothing below this package imports it.
"""
