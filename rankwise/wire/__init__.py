"""The wire: every struct the server sends and the readers decode, declared once.

The store returns these structs, the server encodes them as they are (JSON or
MessagePack), ``Api(server=)`` decodes them as they are, and the OpenAPI document's
reply schemas are derived from them (``rankwise.server.openapi``). "What does
``GET …/series`` return?" is answered here:

* ``runs``: a run and its streams as read back (``RunInfo``, ``StreamInfo``, the
  cross-rank summary value), the project and run lists, metric keys, history rows and
  saved views.
* ``charts``: a metric's chart columns (``Series``, the cross-rank ``Band``) and the
  series and compare replies.
* ``health``: each rank's health, stall events, the hang reply, console pages and
  system series.
* ``media``: media items, tables, histograms (``HistogramsEntry``) and the blob routes.
* ``artifacts``: artifact versions, the commit and use bodies, and the listings.
* ``alerts``: a run's alert events and deliveries, destinations, a test delivery.
* ``auth``: who a request acts as and the token list.
* ``envelopes``: the error shape and the ingest acknowledgement.
* the content types and headers both ends spell the same are in ``rankwise.stream.wire``.

The stream *records* (what ranks write and upload) are ``rankwise.stream.records``.
Nothing here is imported by ``rankwise.wire`` itself: import the module you need.
"""
