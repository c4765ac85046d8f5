"""Request and reply shapes of the HTTP API, by area (``manage``: run edits and filters)."""
