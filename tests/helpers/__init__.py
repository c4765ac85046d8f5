"""Modules the tests import: servers on loopback ports, clean process environments,
headless Chromium, stream records, run and job checks. Programs the tests start as
subprocesses live in ``tests/scripts/``."""
