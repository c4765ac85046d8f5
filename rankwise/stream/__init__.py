"""Stream format shared by the SDK, the reader and the server: records and frames."""

from .frames import MAGIC, Damage, FrameScan, encode_frame, scan
from .records import SCHEMA_VERSION, STATES

__all__ = ["MAGIC", "SCHEMA_VERSION", "STATES", "Damage", "FrameScan", "encode_frame", "scan"]
