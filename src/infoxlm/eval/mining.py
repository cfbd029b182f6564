"""Bitext mining as LASER's ``mine_bitexts.py --mode mine`` does it: each side's distinct
sentences embedded once, margin-scored k-NN both ways, pairs above a threshold, best first.

With the defaults (ratio margin, k = 4, strategy ``max``: the better direction wins and each
sentence is used once, from the best score down) the pairs, their order and their scores are
LASER's ``mine_bitexts.py --mode mine --retrieval max --margin ratio -k 4 --unify`` on the same
vectors: a pair is kept when its score is above the threshold (strictly, as LASER's
``scores[i] > args.threshold``), and a score is written as LASER prints it, the float32 value
in Python's shortest ``repr`` (``1.0734198093414307``). Other strategies are written best
first and thresholded too (LASER writes those in row order, unthresholded). Scores of 1.06 and
up are where NLLB-style pipelines start (a pair whose cosine beats its neighbourhoods' mean
by 6 %); ``threshold=0`` keeps every candidate with a positive margin, LASER's default.

The search (:mod:`~infoxlm.eval.margin`) holds a block of ``rows × n`` similarities at a time,
never ``n × n``: about 256 MiB of them on a CPU, 4 GiB on a GPU. Memory is that block, the
two sides' float32 vectors (``n × d × 4`` bytes each) and the texts.

Example::

    >>> import torch
    >>> x = torch.nn.functional.normalize(torch.randn(6, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    >>> pairs = mine_vectors(x, x + 0.01, MineOptions(threshold=0))
    >>> sorted(zip(pairs.src.tolist(), pairs.trg.tolist())) == [(i, i) for i in range(6)]
    True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..embedding import embed_layers
from ..model.encoder import Encoder
from ..outputs import atomic_file
from ..tokenizer import Tokenizer
from ..train.checkpoint import checkpoint_path
from ..train.model_source import OpenedModel
from .margin import MarginOptions, MinedPairs, candidate_scores, neighbourhood, select_pairs
from .saved_embeddings import SavedEmbeddings

__all__ = ["DEFAULT_THRESHOLD", "MineOptions", "embed_side", "format_score", "mine_vectors", "model_identity", "write_pairs"]

# The margin NLLB-style mining pipelines start from: 6 % closer than the neighbourhoods' mean.
DEFAULT_THRESHOLD = 1.06
# Similarities held at once, (rows × the other side) float32 values: 256 MiB, or 4 GiB on a GPU
# (BENCHMARKS.md, margin k-NN: the peak memory at 10^5 × 10^5; products of these shapes keep
# the CPU's rate).
_BLOCK_VALUES = {"cpu": 1 << 26, "cuda": 1 << 30}


@dataclass(frozen=True)
class MineOptions:
    """How ``infoxlm mine`` embeds and mines; the defaults are LASER's mining and NLLB's threshold."""

    threshold: float = DEFAULT_THRESHOLD
    margin: MarginOptions = MarginOptions()  # k, margin, strategy, search backend (chunk: set by size)
    batch_size: int = 64  # sentences per forward pass
    max_length: int = 512  # tokens per sentence, specials included
    piece: int = 10_000  # sentences embedded between two saves
    dtype: str = "float16"  # of the vectors on disk

    def __post_init__(self) -> None:
        if not np.isfinite(self.threshold):
            raise ValueError(f"threshold must be a finite number, got {self.threshold}")
        for name in ("batch_size", "max_length", "piece"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


def model_identity(model: OpenedModel) -> dict[str, Any]:
    """What saved vectors record of the model: its path, form, step and its weights' files
    (name, size, modification time), so that vectors of retrained weights are not reused."""
    source = model.source
    files = source.weights if source.weights is not None else checkpoint_path(source.path, source.step)
    stats = sorted([p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in Path(files).iterdir() if p.is_file())
    return {"path": str(source.path.resolve()), "kind": source.kind, "step": source.step, "files": stats}


def embed_side(encoder: Encoder, tokenizer: Tokenizer, texts: Sequence[str], saved: SavedEmbeddings, layer: int,
               pooling: str, options: MineOptions, *, progress: bool = False, desc: str = "embedding") -> None:
    """Embed the sentences ``saved`` lacks, a piece at a time, each piece on disk before the next."""
    piece = saved.record["piece"]
    with tqdm(total=saved.rows, initial=saved.done, desc=desc, unit="sent", disable=not progress) as bar:
        for start in range(saved.done, saved.rows, piece):
            vectors = embed_layers(encoder, tokenizer, texts[start : start + piece], [layer], pooling=pooling,
                                   batch_size=options.batch_size, max_length=options.max_length)[layer]  # (piece, d)
            saved.append(vectors)
            bar.update(len(vectors))


def mine_vectors(src: torch.Tensor, trg: torch.Tensor, options: MineOptions, *, progress: bool = False) -> MinedPairs:
    """The mined pairs between unit rows (n_src, d) and (n_trg, d) scoring above the threshold,
    best first (ties: in the order the strategy found them)."""
    block = _BLOCK_VALUES["cuda" if src.device.type == "cuda" else "cpu"]
    rows = max(1, min(options.margin.chunk, block // max(len(src), len(trg))))
    margin = replace(options.margin, chunk=rows)
    with tqdm(total=100, desc="k-NN search", unit="%", bar_format="{l_bar}{bar}| {elapsed}<{remaining}",
              disable=not progress) as bar:
        def advance(fraction: float) -> None:
            bar.update(round(100 * fraction, 2) - bar.n)

        fwd, bwd = neighbourhood(src, trg, margin, progress=advance)
    fwd_scores, bwd_scores = candidate_scores(fwd, bwd, margin.margin)
    pairs = select_pairs(fwd, bwd, fwd_scores, bwd_scores, margin.strategy)
    order = np.argsort(-pairs.score, kind="stable")
    # Compared in float64, as LASER's float64 scores: in float32 the threshold itself would be
    # rounded (a score equal to float32(t) > t would be dropped).
    order = order[pairs.score[order].astype(np.float64) > options.threshold]
    return MinedPairs(pairs.src[order], pairs.trg[order], pairs.score[order])


def format_score(score: float) -> str:
    """A float32 score as LASER prints it (a float64 holding it, shortest repr).

    >>> format_score(np.float32(1.1))
    '1.100000023841858'
    """
    return repr(float(score))


def write_pairs(path: Path, pairs: MinedPairs, src_texts: Sequence[str], trg_texts: Sequence[str]) -> None:
    """``score<TAB>source<TAB>target`` lines, one per pair in order, written atomically (UTF-8)."""
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for s, t, score in zip(pairs.src.tolist(), pairs.trg.tolist(), pairs.score.tolist()):
            f.write(f"{format_score(score)}\t{src_texts[s]}\t{trg_texts[t]}\n")
