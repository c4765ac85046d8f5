"""Artifacts: versioned files and models, content-addressed, from any rank.

``manifest`` (what an artifact version holds and its digest), the user-facing
``Artifact`` class, the local store, the background worker and the HTTP client. The
structs the SDK, the local store and the server share are ``rankwise.wire.artifacts``.
"""
