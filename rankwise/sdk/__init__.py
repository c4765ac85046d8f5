"""The training-side SDK: runs, rank identity, run modes, exit hooks."""
