"""Import weight: the modules a light import of rankwise must leave unloaded."""

from __future__ import annotations

# What ``import rankwise`` must not load: a training script pays for none of it until it
# uses the part that needs it (a server to upload to, a store, the dashboard).
HEAVY = [
    *("torch", "numpy", "pandas", "tqdm", "PIL", "pyarrow"),
    *("httpx", "zstandard"),
    *("fastapi", "starlette", "uvicorn"),
    *("sqlite3", "psycopg"),
]
