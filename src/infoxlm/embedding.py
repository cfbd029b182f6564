"""Sentence embeddings from any layer of an XLM-R-style encoder.

Sentences are sorted by length before batching, so a batch holds sentences of similar length
and padding stays small; the rows come back in input order. Mean pooling averages the hidden
states of every non-padding token, ``<s>`` and ``</s>`` included (the XTREME / Tatoeba
protocol); ``cls`` takes the ``<s>`` state. Layer k is Hugging Face's ``hidden_states[k]``:
0 is the embedding output, L the last layer; without one, the layer the model records (the
contrast layer), else the paper's protocol (model/sentence_layer.py).

A sentence is read and tokenized only as far as it can be embedded: past
``READ_CHARS_PER_TOKEN * max_length`` characters (32,768 at 512 tokens) it is cut before it is
tokenized (:mod:`~infoxlm.corpus.long_lines`), and a file's line is never held further, so a
50 MB line costs what a short one does. What is cut lies past the ``max_length``-th token
unless the line is mostly spaces, so the embeddings are those of the whole line.

Example::

    >>> import infoxlm
    >>> vectors = infoxlm.embed("runs/my-model", ["Hello world.", "Hallo Welt."], layer=8)  # doctest: +SKIP
    >>> vectors.shape  # doctest: +SKIP
    (2, 768)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .corpus.long_lines import LongLines
from .corpus.text_files import iter_line_blocks, iter_stream_blocks
from .model.encoder import Encoder
from .model.fast_paths import FastPaths
from .model.sentence_layer import POOLINGS
from .tokenizer import Tokenizer
from .train.model_source import OpenedModel, open_model


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
    # A sentence longer than can be kept is cut before the tokenizer sees all of it.
    keep = LongLines.for_tokens(max_length).max_chars
    sentences = [sentence[:keep] for sentence in sentences]

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


def read_sentences(path: Path | None, max_length: int = 512) -> tuple[list[str], int]:
    """The lines of a UTF-8 file (standard input if ``path`` is None), blank ones included, each
    read only as far as ``max_length`` tokens can reach, and how many lines were cut so.

    Raises:
        DataError: a missing or unreadable file, invalid UTF-8 (``FILE:LINE: invalid UTF-8 at
            byte N``).
    """
    bound = LongLines.for_tokens(max_length)
    if path is None:
        blocks = iter_stream_blocks(sys.stdin.buffer, "<stdin>", long_lines=bound)
    else:
        blocks = iter_line_blocks(path, long_lines=bound)
    sentences: list[str] = []
    cut = 0
    for block in blocks:
        sentences.extend(block.lines)  # type: ignore[arg-type]
        cut += block.cut
    return sentences, cut


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, d) hidden states, (B, T) mask → (B, d): mean over non-padding tokens, or ``<s>``."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def embed(
    model_path: str | Path,
    sentences: Sequence[str],
    layer: int | None = None,
    pooling: str | None = None,
    batch_size: int = 32,
    *,
    step: int | None = None,
    max_length: int = 512,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Embed sentences with a model and its tokenizer: float32 (N, d).

    ``model_path``: a Hugging Face directory, a sentence-transformers export or a run directory
    (its latest checkpoint, or ``step``); see train/model_source.py. ``layer`` is a Hugging Face
    ``hidden_states`` index (default: the layer the model records, else the paper's protocol;
    model/sentence_layer.py); ``pooling`` defaults to what a sentence-transformers export
    records, else mean.
    """
    with open_model(model_path, step, flag="model_path", step_flag="step=N") as model:
        layer, _ = model.layer(layer, flag="layer")
        pooling = model.pooling(pooling, flag="pooling")
        encoder, tokenizer = load_for_inference(model, device)
    vectors = embed_layers(
        encoder, tokenizer, sentences, [layer], pooling=pooling, batch_size=batch_size, max_length=max_length, progress=progress
    )
    return vectors[layer]


def load_for_inference(model: OpenedModel, device: str | torch.device | None = None) -> tuple[Encoder, Tokenizer]:
    """The encoder (with ``FastPaths.inference()``, on ``device``, default: cuda if available)
    and the tokenizer of an opened model; a model without a tokenizer is refused first."""
    tokenizer = model.tokenizer("embedding")
    device = torch.device(device) if device is not None else default_device()
    encoder = Encoder.from_pretrained(model.directory, fast_paths=FastPaths.inference()).to(device)
    return encoder, tokenizer
