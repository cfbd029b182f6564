"""Sentence embeddings from any layer of an XLM-R-style encoder.

Sentences are sorted by length before batching, so a batch holds sentences of similar length
and padding stays small; the rows come back in input order. Mean pooling averages the hidden
states of every non-padding token, ``<s>`` and ``</s>`` included (the XTREME / Tatoeba
protocol); ``cls`` takes the ``<s>`` state. Layer k is Hugging Face's ``hidden_states[k]``:
0 is the embedding output, L the last layer.

Example::

    >>> import infoxlm
    >>> vectors = infoxlm.embed("runs/my-model", ["Hello world.", "Hallo Welt."], layer=8)  # doctest: +SKIP
    >>> vectors.shape  # doctest: +SKIP
    (2, 768)
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .errors import InfoXLMError
from .model.config import EncoderConfig
from .model.encoder import Encoder
from .model.fast_paths import FastPaths
from .tokenizer import Tokenizer

POOLINGS = ("mean", "cls")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@torch.no_grad()
def embed_layers(
    encoder: Encoder,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    layers: Sequence[int],
    *,
    pooling: str = "mean",
    batch_size: int = 32,
    max_length: int = 512,
    progress: bool = False,
    desc: str = "embedding",
) -> dict[int, np.ndarray]:
    """Pooled embeddings of ``sentences`` at each of ``layers``: {layer: float32 array (N, d)}.

    The encoder runs once per batch, only as deep as the deepest layer asked for, in eval mode,
    with the fast paths it was built with (an encoder loaded with ``FastPaths.inference()``, as
    infoxlm's loaders do, runs its position-wise parts on real tokens only: pooling never reads
    the padding positions) and (on a GPU) under bf16 autocast; it is left on its device and in
    its previous mode. ``desc`` labels the progress bar (shown with ``progress``).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r}: expected one of {POOLINGS}")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: expected a positive integer")
    L = encoder.num_layers
    layers = list(dict.fromkeys(layers))  # unique, order kept
    for layer in layers:
        if not 0 <= layer <= L:
            raise ValueError(f"layer={layer}: expected 0 (embedding output) … {L} (last layer)")
    max_length = min(max_length, encoder.config.max_sequence_length)

    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    d = encoder.config.hidden_size
    out = {layer: np.empty((len(sentences), d), dtype=np.float32) for layer in layers}
    ids = tokenizer.encode_batch(list(sentences), max_length=max_length)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    try:
        with tqdm(total=len(ids), desc=desc, unit="sent", disable=not progress) as bar:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                input_ids, attention_mask = tokenizer.pad([ids[i] for i in rows])
                input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
                with autocast:
                    hidden = encoder(input_ids, attention_mask, num_layers=max(layers)).hidden_states
                for layer in layers:
                    pooled = pool(hidden[layer].float(), attention_mask, pooling)  # (b, d)
                    out[layer][rows] = pooled.cpu().numpy()
                bar.update(len(rows))
    finally:
        encoder.train(was_training)
    return out


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, d) hidden states, (B, T) mask → (B, d): mean over non-padding tokens, or ``<s>``."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def resolve_layer(model_path: str | Path, layer: int | None, name: str = "layer") -> int:
    """``layer`` checked against the model's ``config.json`` (None: the last layer), before any
    weight is read; an index outside 0 … L is an ``InfoXLMError`` naming both."""
    config = EncoderConfig.load(model_path)
    L = config.num_hidden_layers
    if layer is None:
        return L
    if not 0 <= layer <= L:
        raise InfoXLMError(
            f"{name} {layer}: {Path(model_path) / 'config.json'} gives {L} layers; expected "
            f"0 (embedding output) … {L} (last layer)"
        )
    return layer


def embed(
    model_path: str | Path,
    sentences: Sequence[str],
    layer: int | None = None,
    pooling: str = "mean",
    batch_size: int = 32,
    *,
    max_length: int = 512,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Embed sentences with the model (and tokenizer) saved in ``model_path``: float32 (N, d).

    ``layer`` is a Hugging Face ``hidden_states`` index (default: the last layer).
    """
    layer = resolve_layer(model_path, layer)
    device = torch.device(device) if device is not None else default_device()
    encoder = Encoder.from_pretrained(model_path, fast_paths=FastPaths.inference()).to(device)
    tokenizer = Tokenizer.from_pretrained(model_path)
    vectors = embed_layers(
        encoder,
        tokenizer,
        sentences,
        [layer],
        pooling=pooling,
        batch_size=batch_size,
        max_length=max_length,
        progress=progress,
    )
    return vectors[layer]
