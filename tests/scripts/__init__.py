"""Scripts the tests run in subprocesses, and ``jobs``, the helpers to check them."""
