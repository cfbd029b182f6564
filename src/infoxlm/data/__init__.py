"""Token store → training batches: the store reader, language sampling, examples, masking and
micro-batches (:mod:`infoxlm.corpus` writes the stores)."""
