"""Helpers of the server, upload and sync tests: real servers on loopback ports."""
