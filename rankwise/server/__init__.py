"""The rankwise server: the HTTP API over a ``Store``, the local tailer, and the runners.

``create_app(store, settings)`` builds the ASGI app; ``rankwise ui`` and ``rankwise
server`` (``serve``) run it with uvicorn. Importing this package imports FastAPI: the SDK
never does.
"""

from .app import create_app
from .config import ServerSettings

__all__ = ["ServerSettings", "create_app"]
