"""The HTTP routes, one module per room: ingest, runs, health, saved views, login.

Each module holds an ``APIRouter``; ``rankwise.server.app`` mounts them under ``/api/v1``
with their auth policy. Helpers the routes share live in ``deps``.
"""
