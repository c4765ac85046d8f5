"""The reply structs of the HTTP API and ``Api``: what a server and ``rankwise ui`` send,
one module per subject (``code``: what ran)."""
