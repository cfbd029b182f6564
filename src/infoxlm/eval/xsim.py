"""xsim: the margin-scored similarity-search error rate of LASER's ``source/xsim.py``, on
Flores-200 as shipped or on any two line-aligned files, at one layer or all of them.

For a source file and a target file whose line i translate each other, every source sentence's
best target by margin (cosine k-NN both ways, k = 4, ratio margin: :mod:`~infoxlm.eval.margin`)
is found, and the error rate is the share (%) of source sentences whose best target is not the
aligned one. A target line with the same text as the aligned one counts as found, as LASER's
``eval.py`` compares texts by default (Flores holds a few repeated lines). The same
neighbourhoods give the other direction (target → source). Every line is scored, a repeated
line too (the k-NN sees each, as in LASER), though a text is embedded once.

Flores-200 (``flores200_dataset/{dev,devtest}/{lang}.{split}``, codes ``deu_Latn``): each
language is scored against English (``eng_Latn``) or another ``target``, both directions, and
the rates averaged over the languages (all Flores files have the same lines, so this is also
LASER's pooled rate). LASER3, SONAR and MEXMA report xsim on Flores this way (xx → eng, ratio
margin); lower is better, 0 is perfect.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from ..embedding import embed_layers
from ..errors import EvalDataError
from ..model.encoder import Encoder
from ..tokenizer import Tokenizer
from .eval_lines import read_lines
from .margin import MarginOptions, candidate_scores, neighbourhood, select_pairs, unique_texts, unit_rows

FLORES_SPLITS = ("dev", "devtest")
ENGLISH = "eng_Latn"
XSIM_MARGIN = MarginOptions(k=4, margin="ratio")


@dataclass(frozen=True)
class AlignedText:
    """The lines of one file (or Flores language), line i translating line i of the others."""

    name: str  # "deu_Latn", or the file's name
    path: Path
    lines: list[str]


def read_aligned(path: Path, name: str | None = None, cut_lines: dict[str, int] | None = None) -> AlignedText:
    """Every line of a UTF-8 file, blank ones included; an empty file is refused."""
    lines = read_lines(path, "one sentence a line", cut_lines)
    return AlignedText(name or path.name, path, lines)


def check_aligned(texts: Sequence[AlignedText]) -> None:
    """Refuse files of different lengths, naming the first that differs from the first file."""
    first = texts[0]
    for other in texts[1:]:
        if len(other.lines) != len(first.lines):
            raise EvalDataError(f"{other.path} has {len(other.lines)} lines but {first.path} has {len(first.lines)}; "
                                "expected line-aligned files (line i of one translates line i of the other)")


def flores_file(data: Path, split: str, language: str) -> Path:
    return data / split / f"{language}.{split}"


def flores_languages(data: Path, split: str) -> list[str]:
    """Every language with a file in ``data/split/``, sorted."""
    if split not in FLORES_SPLITS:
        raise EvalDataError(f"--split {split!r}: expected one of {', '.join(FLORES_SPLITS)} (Flores-200's splits)")
    folder = data / split
    found = sorted(p.name[: -len(split) - 1] for p in folder.glob(f"*.{split}"))
    if not found:
        raise EvalDataError(f"{folder}: no {{lang}}.{split} files; expected Flores-200 as shipped (flores200_dataset/)")
    return found


def load_flores(data: str | Path, split: str, languages: Sequence[str] | None, target: str = ENGLISH,
                cut_lines: dict[str, int] | None = None) -> tuple[AlignedText, list[AlignedText]]:
    """The target language's lines and each source language's (default: every language of the
    split but the target), read and checked to be line-aligned."""
    data = Path(data)
    available = flores_languages(data, split)
    chosen = list(dict.fromkeys(languages)) if languages else [x for x in available if x != target]
    for language in [target, *chosen]:
        if language not in available:
            raise EvalDataError(f"{flores_file(data, split, language)}: missing; expected a Flores-200 code "
                                f"with a file in {data / split} (such as {ENGLISH}, deu_Latn)")
    if target in chosen:
        raise EvalDataError(f"--langs {target}: is the target; expected languages to score against it")
    texts = [read_aligned(flores_file(data, split, x), x, cut_lines) for x in [target, *chosen]]
    check_aligned(texts)
    return texts[0], texts[1:]


def xsim_errors(src: torch.Tensor, trg: torch.Tensor, src_lines: Sequence[str], trg_lines: Sequence[str],
                options: MarginOptions = XSIM_MARGIN) -> tuple[int, int]:
    """Errors source → target and target → source of aligned vectors (n, d), (n, d): sentences
    whose margin-best neighbour has not the aligned line's text."""
    fwd, bwd = neighbourhood(unit_rows(src), unit_rows(trg.to(src.device)), options)
    fwd_scores, bwd_scores = candidate_scores(fwd, bwd, options.margin)
    to_trg = select_pairs(fwd, bwd, fwd_scores, bwd_scores, "fwd").trg  # (n,) each source's best target row
    to_src = select_pairs(fwd, bwd, fwd_scores, bwd_scores, "bwd").src  # (n,) each target's best source row
    return (sum(trg_lines[j] != trg_lines[i] for i, j in enumerate(to_trg.tolist())),
            sum(src_lines[j] != src_lines[i] for i, j in enumerate(to_src.tolist())))


def _embed_rows(encoder: Encoder, tokenizer: Tokenizer, text: AlignedText, layers: Sequence[int], **kwargs) -> dict[int, torch.Tensor]:
    """{layer: (n_lines, d)} on the encoder's device, each distinct text embedded once."""
    distinct, rows = unique_texts(text.lines)
    device = next(encoder.parameters()).device
    vectors = embed_layers(encoder, tokenizer, distinct, layers, **kwargs)
    index = torch.as_tensor(rows, device=device)
    return {k: torch.as_tensor(v).to(device)[index] for k, v in vectors.items()}


def evaluate_xsim(
    encoder: Encoder,
    tokenizer: Tokenizer,
    target: AlignedText,
    sources: Sequence[AlignedText],
    layers: Sequence[int],
    *,
    options: MarginOptions = XSIM_MARGIN,
    pooling: str = "mean",
    batch_size: int = 64,
    progress: bool = False,
) -> dict[int, dict]:
    """xsim error rates (%) of each source against the target, both ways, at each layer.

    Returns {layer: {"layer", "pooling", "target", "languages": {name: {"xx2tgt", "tgt2xx",
    "n"}}, "average": {"xx2tgt", "tgt2xx", "both"}}}.
    """
    kwargs = dict(pooling=pooling, batch_size=batch_size, progress=progress)
    trg = _embed_rows(encoder, tokenizer, target, layers, desc=f"{target.name} (target)", **kwargs)
    per_layer: dict[int, dict[str, dict]] = {k: {} for k in layers}
    for i, source in enumerate(sources, start=1):
        src = _embed_rows(encoder, tokenizer, source, layers, desc=f"{source.name} ({i}/{len(sources)})", **kwargs)
        n = len(source.lines)
        for k in layers:
            to_trg, to_src = xsim_errors(src[k], trg[k], source.lines, target.lines, options)
            per_layer[k][source.name] = {"xx2tgt": 100 * to_trg / n, "tgt2xx": 100 * to_src / n, "n": n}
    return {k: {"layer": k, "pooling": pooling, "target": target.name, "languages": scores, "average": _average(scores)}
            for k, scores in per_layer.items()}


def _average(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean error rate of each direction over the languages, and of both directions."""
    mean = {d: float(np.mean([s[d] for s in scores.values()])) for d in ("xx2tgt", "tgt2xx")}
    return {**mean, "both": (mean["xx2tgt"] + mean["tgt2xx"]) / 2}
