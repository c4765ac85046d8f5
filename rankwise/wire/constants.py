"""Names both ends of the wire spell the same: content types and headers.

Kept here, with no import beyond the standard library, so the server does not import
the client's httpx module (``rankwise._http``) for a header name, nor the client the
server's modules.
"""

from __future__ import annotations

MSGPACK = "application/msgpack"
# The body of ``POST /api/v1/ingest``: ``MAGIC`` and whole frames, as in the stream file.
STREAM_CONTENT_TYPE = "application/x-rankwise-stream"
# Ingest replies under load: post at most every this many seconds (rankwise.server.pacing).
UPLOAD_INTERVAL_HEADER = "X-Rankwise-Upload-Interval"
