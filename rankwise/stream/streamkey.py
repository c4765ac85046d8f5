"""A stream's secret: what binds a stream on the server to the process that writes it.

An ingest token is per project: every holder can post to every stream of it. So the SDK
makes a random secret for each stream it creates and keeps it in a sidecar file beside
the stream (``<label>.<incarnation>.rwlog.key``, mode 0600; no reader of a data
directory takes it for a stream). The stream's ``StreamStart`` carries only its sha256
(``key_digest``); every upload of the stream presents the secret in the ``HEADER``
header (the uploader, ``rankwise sync``, an uploader adopting a dead sibling's stream).
A server applies an upload of a stream whose first ``StreamStart`` names a digest only
when the secret it presents matches it: another holder of the token can read the
stream's mark but can no longer push it on or finish the stream.

A stream without a digest (an older SDK, another writer of the format) is open to any
holder of the token, as before. ``rankwise ui`` indexes files directly and needs no secret.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from .wire import STREAM_KEY_HEADER

HEADER = STREAM_KEY_HEADER
SUFFIX = ".key"
# Printable and short: an HTTP header value, 256 bits of randomness.
_MAX_LEN = 256


def key_path(stream: Path) -> Path:
    """Where the secret of the stream file ``stream`` is kept."""
    return stream.with_name(stream.name + SUFFIX)


def digest(secret: str) -> str:
    """The sha256 (hex) of ``secret``: what the stream's StreamStart carries."""
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str | None, want: str) -> bool:
    """Whether ``secret`` is the one whose digest is ``want`` (constant time)."""
    if secret is None:
        return False
    return hmac.compare_digest(digest(secret), want)


def create(stream: Path) -> str:
    """Make the secret of the new stream file ``stream`` and keep it beside it (0600,
    never overwritten); returns its digest for the stream's StreamStart."""
    secret = secrets.token_urlsafe(32)
    fd = os.open(key_path(stream), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secret.encode())
    finally:
        os.close(fd)
    return digest(secret)


def read(stream: Path) -> str | None:
    """The secret kept beside ``stream``, or None when it has none (an older SDK's
    stream) or it cannot be read (the server then refuses the uploads of a stream
    whose StreamStart names a digest, with a message naming the file)."""
    try:
        with open(key_path(stream), "rb") as f:
            raw = f.read(_MAX_LEN + 1)
    except OSError:
        return None
    text = raw.decode("ascii", "replace").strip()
    return text if text and len(text) <= _MAX_LEN and text.isprintable() else None
