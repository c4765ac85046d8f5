"""Reading runs back: one read model, one fold, two readers.

* The read model, what a run and a stream are as read back, is ``rankwise.wire.runs``
  (msgspec structs). The local reader returns them, the store returns them, the server
  encodes them as they are and ``Api(server=)`` decodes them as they are; the OpenAPI
  document is derived from them.
* ``fold``: ``fold_run`` — a run's derived fields (state, crashed, created, steps, first
  failure, summaries, ...) from its streams' facts, for the local reader and the store.
* ``local``: ``Api(dir=)``, folding a data directory's stream files directly.
* ``remote``: ``Api(server=)``, over the HTTP API (imported lazily: it imports httpx).

``rankwise.api`` keeps the ``Api`` façade that picks a reader.
"""
