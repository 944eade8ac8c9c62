"""JSON Schemas shipped with the package (results.json)."""
