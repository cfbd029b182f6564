"""Raw input → token store: reading text, records and TMX; cleaning; languages; sharded and
merged prepares; the store writer; ``infoxlm prepare`` and what it reports.

The store's format and its reader live in :mod:`infoxlm.data`, which turns a store into
training batches; this package imports that one, never the other way round.
"""
