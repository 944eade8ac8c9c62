"""What an output checker receives: records, signatures, the export folder and its checks.

* :mod:`.ledger`: output records, persisted as JSON lines next to the notebook;
* :mod:`.signing`: the per-installation HMAC key signing each output's status and digest;
* :mod:`.layout`: the export folder's format (ACRO's layout, manifest, checksums, shapes);
* :mod:`.export`: writes the cleared outputs of a session;
* :mod:`.verification`, :mod:`.reaudit`: ``sdc-magic verify`` without the data;
* :mod:`.redact`: keep only outputs with a valid clearance (CLI, nbconvert, pre-save hook);
* ``schemas/``: the JSON schema of ``results.json``.
"""
