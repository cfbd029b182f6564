"""The hidden state a sentence vector comes from when no layer is named: one rule for every
command (``infoxlm embed``, ``eval tatoeba``, ``export --format sentence-transformers``).

Layer k is Hugging Face's ``hidden_states[k]``: 0 is the embedding output, L the last layer.
The rule, in order:

1. the layer the model records: the universal layer XLCO contrasted (``infoxlm_contrast_layer``
   in an exported model's config.json, a run's ``contrast.layer``), where infoxlm aligns
   sentences; for a sentence-transformers export, the layer it was cut at (its last);
2. the paper's protocol ("following XTREME, the seventh Transformer layer"): hidden state 8 of
   a 12-layer model, 14 of a 24-layer one (the layers XTREME's run_tatoeba.sh uses);
3. otherwise the middle layer.
"""

from __future__ import annotations

# XTREME's scripts/run_tatoeba.sh passes --specific_layer 7 (of --num_layers 12), and 13 (of 24)
# for xlm-roberta-large; third_party/evaluate_retrieval.py drops the embedding output from the
# hidden states before indexing them, so its layer n is hidden_states[n + 1]: 8 and 14.
XTREME_LAYERS = {12: 8, 24: 14}

RECORDED_CONTRAST_LAYER = "the contrast layer the model records"

# How that layer's token states become one vector: "cls", the <s> state (the paper's XLCO), or
# "mean" over every non-padding token, <s> and </s> included (XTREME's retrieval; what embed
# and export default to). XLCO, embedding, the model argument and the sentence-transformers
# export accept these.
POOLINGS = ("cls", "mean")


def default_layer(num_layers: int, recorded: int | None = None, recorded_as: str = RECORDED_CONTRAST_LAYER) -> tuple[int, str]:
    """(hidden_states index, the rule in words) for an encoder of ``num_layers`` layers that
    records the layer ``recorded`` (ignored outside 1 … ``num_layers``).

    >>> default_layer(12), default_layer(12, recorded=5)[0], default_layer(6)
    ((8, 'XTREME: layer 7 of 12 above the embeddings'), 5, (3, 'the middle layer of 6'))
    """
    if recorded is not None and 1 <= recorded <= num_layers:
        return recorded, recorded_as
    if num_layers in XTREME_LAYERS:
        k = XTREME_LAYERS[num_layers]
        return k, f"XTREME: layer {k - 1} of {num_layers} above the embeddings"
    return (num_layers + 1) // 2, f"the middle layer of {num_layers}"
