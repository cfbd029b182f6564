"""A sentence-transformers directory of an encoder, cut at the layer the method aligned.

``SentenceTransformer(OUT)`` loads it with no code of infoxlm's, and its ``encode`` gives the
vectors ``infoxlm embed --layer K`` gives: the directory holds the first K layers
(``num_hidden_layers = K`` in its ``config.json``), so its last layer is hidden state K, and a
Pooling module that pools as infoxlm does (mean over every non-padding token, ``<s>`` and
``</s>`` included, or the ``<s>`` state). Inputs are cut at 512 tokens with the specials, or at
what the position table holds. Layout, as sentence-transformers writes it::

    OUT/config.json, model.safetensors, tokenizer files   the transformer (XLMRobertaModel)
    OUT/modules.json                                      Transformer → Pooling
    OUT/sentence_bert_config.json                         max_seq_length
    OUT/config_sentence_transformers.json                 cosine similarity; the infoxlm layer and pooling
    OUT/1_Pooling/config.json                             mean or cls
"""

from __future__ import annotations

import json
from pathlib import Path

from ..version import __version__
from ..errors import InfoXLMError
from ..model.config import EncoderConfig
from ..model.encoder import Encoder
from ..model.sentence_layer import POOLINGS
from ..tokenizer import Tokenizer

MAX_SEQ_LENGTH = 512


def truncated(encoder: Encoder, layer: int) -> Encoder:
    """A copy of ``encoder`` with its first ``layer`` layers only (hidden state ``layer`` on top)."""
    L = encoder.num_layers
    if not 1 <= layer <= L:
        raise InfoXLMError(f"--layer {layer}: expected a layer 1 … {L} (the model has {L}; 0, the embedding output, has no layer to keep)")
    config = EncoderConfig(**{**encoder.config.__dict__, "num_hidden_layers": layer})
    cut = Encoder(config)
    state = {k: v for k, v in encoder.state_dict().items() if not _layer_at_or_above(k, layer)}
    cut.load_state_dict(state, strict=False)
    cut.loaded_parts = set(encoder.loaded_parts)
    return cut


def _layer_at_or_above(key: str, layer: int) -> bool:
    parts = key.split(".")
    return key.startswith("encoder.layer.") and int(parts[2]) >= layer


def write_sentence_transformers(encoder: Encoder, tokenizer: Tokenizer, directory: str | Path, *, layer: int, pooling: str = "mean") -> Path:
    """Write ``encoder`` cut at ``layer`` and ``tokenizer`` as a sentence-transformers directory."""
    if pooling not in POOLINGS:
        raise InfoXLMError(f"--pooling {pooling}: expected one of {', '.join(POOLINGS)}")
    directory = Path(directory)
    model = truncated(encoder, layer)
    model.save_pretrained(directory, tokenizer, include_mlm_head=False)
    d = model.config.hidden_size
    max_seq_length = min(MAX_SEQ_LENGTH, model.config.max_sequence_length)
    _write_json(directory / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    _write_json(directory / "config_sentence_transformers.json", {
        "__version__": {"infoxlm": __version__},
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
        # source_layers: the depth of the encoder it was cut from (its model card says it)
        "infoxlm": {"layer": layer, "pooling": pooling, "max_seq_length": max_seq_length, "source_layers": encoder.num_layers},
    })
    (directory / "1_Pooling").mkdir(exist_ok=True)
    _write_json(directory / "1_Pooling" / "config.json", {
        "word_embedding_dimension": d,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    })
    return directory


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
