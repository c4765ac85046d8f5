"""Rich values for ``run.log()``: images, tables, histograms, audio, video, text, html.

Each is built on the training thread (checks and a copy only) and encoded later on the
run's encoder thread (``rankwise.sdk.encoder``) into content-addressed blob files and a
record (``Media``, ``TableRec``, ``HistogramRec`` in ``rankwise.stream.records``).
numpy, Pillow and pyarrow are imported only when a value is built (extra ``[media]``).
"""

from .av import Audio, Video
from .base import MediaValue, Rich
from .histogram import Histogram
from .image import Image
from .table import Table
from .text import Html, Text

__all__ = ["Audio", "Histogram", "Html", "Image", "MediaValue", "Rich", "Table", "Text", "Video"]
