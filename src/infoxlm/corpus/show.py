"""What training sees: the examples of one step, decoded (``infoxlm prepare show``).

Each example is printed as text with its special tokens visible (``<s>``, ``</s>``) and each
masked position as ``[INPUT→ORIGINAL]``: ``[<mask>→Welt]`` for the 80 % replaced by
``<mask>``, ``[▁Haus→Welt]`` for the 10 % replaced by a random piece, ``[Welt→Welt]`` for the
10 % kept but still predicted. Runs of unmasked ordinary tokens are decoded as the tokenizer
decodes them. XLCO examples are printed as their query and key views.

Example:
    >>> pipeline = DataPipeline(TokenStore.open("store"), PipelineConfig())   # doctest: +SKIP
    >>> print(render_step(pipeline, tokenizer, "mmlm", step=0, count=2))       # doctest: +SKIP
    mmlm, step 0, example 0 (slot 0): de block 17, 498 tokens, 74 predicted
    <s> Der erste Satz.</s> Der [<mask>→▁zweite] Satz.</s></s> …
"""

from __future__ import annotations

import numpy as np

from infoxlm.data.masking import MaskedSequences
from infoxlm.data.pipeline import OBJECTIVES, DataPipeline
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer

__all__ = ["render_step", "render_sequence"]


def render_sequence(tokenizer: Tokenizer, inputs: np.ndarray, original: np.ndarray, masked: np.ndarray) -> str:
    """One sequence as text: inputs (L,), original (L,) ids, masked (L,) bool."""
    parts: list[str] = []
    run: list[int] = []  # unmasked ids waiting to be decoded together

    def flush() -> None:
        if run:
            parts.append(tokenizer.decode(run, skip_special_tokens=False))
            run.clear()

    for token, before, is_masked in zip(inputs.tolist(), original.tolist(), masked.tolist()):
        if is_masked:
            flush()
            parts.append(f"[{_piece(tokenizer, token)}→{_piece(tokenizer, before)}]")
        else:
            run.append(token)
    flush()
    return " ".join(parts)


def _piece(tokenizer: Tokenizer, token: int) -> str:
    """A single token as text; a piece that decodes to nothing (a bare word boundary) as ▁."""
    return tokenizer.decode([token], skip_special_tokens=False).strip() or "▁"


def render_step(pipeline: DataPipeline, tokenizer: Tokenizer, objective: str, step: int, count: int) -> str:
    """The first ``count`` examples (slots 0 … count - 1) of ``objective`` at optimizer ``step``.

    Raises:
        DataError: an unknown or disabled objective, a negative step, or ``count`` outside
            1 … the objective's global batch size.
    """
    if objective not in OBJECTIVES:
        raise DataError(f"objective {objective!r} is unknown; expected one of {', '.join(OBJECTIVES)}")
    batch = pipeline.config.batch_size(objective)
    if batch == 0:
        raise DataError(f"{objective} is disabled in this config (data.{objective}_batch_size=0); nothing to show")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise DataError(f"step {step!r} is invalid; expected an integer >= 0 (0 is the first optimizer step)")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= batch:
        raise DataError(f"--examples {count!r} is invalid; expected 1 … {batch} (data.{objective}_batch_size)")
    slots = np.arange(count, dtype=np.int64)
    sources = pipeline.sources(objective, step, slots)
    made = pipeline.examples(objective, step, slots)
    views = {"": made[0]} if objective != "xlco" else {"query": made[0], "key": made[1]}
    blocks = []
    for row, source in enumerate(sources):
        lines = []
        for name, view in views.items():
            inputs, original, masked = _row(view, row)
            label = f"{name} view: " if name else ""
            lines.append(f"{label}{len(inputs)} tokens, {int(masked.sum())} predicted")
            lines.append(render_sequence(tokenizer, inputs, original, masked))
        header = f"{objective}, step {step}, example {row} (slot {row}): {source}"
        blocks.append("\n".join([header, *lines]))
    return "\n\n".join(blocks)


def _row(view: MaskedSequences, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inputs, original, masked) of one sequence of a masked batch."""
    lo, hi = view.inputs.offsets[row], view.inputs.offsets[row + 1]
    return view.inputs.values[lo:hi], view.original[lo:hi], view.masked[lo:hi]
