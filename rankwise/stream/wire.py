"""The ingest wire's names: the content type and headers an uploader and a server share.

Both sides import these from here: the client's HTTP seam (``rankwise._http``, which
imports httpx) and the server (``rankwise.server.routes.ingest``, the hardening layer).
This module imports nothing, so the server never loads the client's network library for
a header name.
"""

from __future__ import annotations

# The body of ``POST /api/v1/ingest``: MAGIC + whole frames (``rankwise.stream.frames``).
STREAM_CONTENT_TYPE = "application/x-rankwise-stream"
# The body of ``POST /api/v1/ingest/batch``: several streams' uploads in one request
# (``rankwise.wire.envelopes.IngestBatch`` in MessagePack).
BATCH_CONTENT_TYPE = "application/x-rankwise-batch"
# Replies in MessagePack when a request's Accept names it (floats exact, NaN kept).
MSGPACK = "application/msgpack"
# Ingest replies under load: post at most every this many seconds (``server.pacing``).
UPLOAD_INTERVAL_HEADER = "X-Rankwise-Upload-Interval"
# The stream's secret on every upload of a bound stream (``rankwise.stream.streamkey``).
STREAM_KEY_HEADER = "X-Rankwise-Stream-Key"
# Seconds to wait before a refused (429/503) upload is sent again.
RETRY_AFTER_HEADER = "Retry-After"
