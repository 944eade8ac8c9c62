"""What the analyst sees: the protected copy and better answers.

* :mod:`.bundle`: the renderer's mime type, canonical JSON and digest, harmless messages, the
  one status vocabulary;
* :mod:`.render`: text/plain, text/html and the renderer's JSON payload of a checked table;
* :mod:`.suggest`: better answers (coarser groupings, merges, rates, a reply);
* :mod:`.widget`: the ipywidgets view (Python API only).
"""
