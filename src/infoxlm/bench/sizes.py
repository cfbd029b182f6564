"""The named benchmark sizes: model shape, sequence lengths, contrast settings, default batches.

Each size is the training preset of its name (train/presets.py), read off it: the encoder,
the sequence lengths and the contrast the trainer runs. ``base`` and ``large`` are XLM-R base
(12×768) and large (24×1024) with the 250,002-piece vocabulary, 512-token MMLM blocks and TLM
pairs, the universal layer 8 / 12 and a queue of 131,072 keys; ``demo`` is the step ``infoxlm
demo`` trains, with the demo's vocabulary; ``test`` runs in seconds. What the benchmark
chooses itself: the vocabulary of ``test``, XLCO views of 256 tokens at ``base`` and
``large`` (the presets' 512 halved, ``--set data.xlco_max_length=256`` in training: every
base and large figure was measured so), and the batches below.

Default batches (examples per optimizer step for MMLM, TLM, XLCO) are small on a CPU, so
that a ``base`` step takes seconds, and on a GPU a global batch of 256 examples per
objective (an eighth of the paper's 2,048: the benchmark has to fit in minutes), accumulated
over micro-batches. Each side cuts that global batch to fit its own memory: infoxlm's
micro-batches hold 98,304 padded tokens at base (16,384 at large, beside the baseline on
one card); fewer, larger micro-batches mean fewer kernel launches per step, which is what
bounds a step once the device no longer waits on the host. The baseline computes vocabulary logits at every
position, so its 8,192-token micro-batches already hold 8192 × 250,002 logits (4 GB in
bf16, plus its fp32 softmax and gradient). Both sides see the same examples, masks and
global batch; the loss check runs each side on its own cut of the first step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..demo.settings import FULL
from ..errors import InfoXLMError
from ..train.presets import preset


class BenchError(InfoXLMError):
    """A benchmark that cannot run as asked (unknown size, missing device or library, …)."""


@dataclass(frozen=True)
class Batches:
    """Examples per optimizer step for each objective, and the micro-batch budget."""

    mmlm: int
    tlm: int
    xlco: int
    # Padded tokens per micro-batch (rows × longest row; both views for XLCO); None: picked
    # as a training run with data.max_tokens unset picks it (train/token_budget.py).
    max_tokens: int | None
    # The baseline's own micro-batch budget (None: the same). The global batch is the same on
    # both sides; only how it is cut for gradient accumulation differs, because the baseline's
    # logits at every position need several times the memory per token.
    baseline_max_tokens: int | None = None

    @property
    def baseline_tokens(self) -> int:
        return self.max_tokens if self.baseline_max_tokens is None else self.baseline_max_tokens


@dataclass(frozen=True)
class BenchSize:
    name: str
    encoder: str  # an encoder size (EncoderConfig.of_size)
    vocab_size: int
    block_size: int
    tlm_max_length: int
    xlco_max_length: int
    # XLCO's settings: every field of the preset's train.config.ContrastConfig.
    contrast: dict[str, Any]
    cpu: Batches
    cuda: Batches
    steps: dict[str, int]  # timed steps per device type
    warmup: dict[str, int]

    @property
    def contrast_layer(self) -> int:
        return self.contrast["layer"]

    @property
    def queue_size(self) -> int:
        return self.contrast["queue_size"]

    @property
    def pooling(self) -> str:
        """The contrast's sentence vector: "cls" (the paper's <s> state) unless the size says otherwise."""
        return self.contrast.get("pooling", "cls")

    def batches(self, device_type: str) -> Batches:
        return self.cuda if device_type == "cuda" else self.cpu


def _from_preset(name: str, vocab_size: int, *, xlco_max_length: int | None = None, **bench: Any) -> BenchSize:
    """The size of preset ``name``: its encoder, sequence lengths (XLCO's unless given) and
    contrast, with the benchmark's own vocabulary size, batches (``cpu``, ``cuda``), ``steps``
    and ``warmup``."""
    config = preset(name)
    data = config.data
    return BenchSize(
        name, config.model.size, vocab_size, data.block_size, data.tlm_max_length, xlco_max_length or data.xlco_max_length,
        dataclasses.asdict(config.contrast), **bench,
    )  # fmt: skip


def _demo_size() -> BenchSize:
    """The step ``infoxlm demo`` trains, with the demo's vocabulary, on a CPU the preset's own
    batches; on a GPU, larger batches of the same recipe."""
    data = preset("demo").data
    return _from_preset(
        "demo", FULL.vocab_size,
        cpu=Batches(data.mmlm_batch_size, data.tlm_batch_size, data.xlco_batch_size, data.max_tokens),
        cuda=Batches(256, 256, 512, 16384),
        steps={"cpu": 10, "cuda": 20}, warmup={"cpu": 2, "cuda": 3},
    )  # fmt: skip


SIZES: dict[str, BenchSize] = {
    "test": _from_preset(
        "test", 1000, cpu=Batches(4, 4, 4, 256), cuda=Batches(4, 4, 4, 256),
        steps={"cpu": 5, "cuda": 20}, warmup={"cpu": 1, "cuda": 3},
    ),
    "demo": _demo_size(),
    "base": _from_preset(
        "base", 250_002, xlco_max_length=256,
        # Micro-batches of 98,304 tokens: larger micro-batches mean fewer, fuller products,
        # and this size still fits an 80 GB card (see BENCHMARKS.md, "GPU: one H100, base
        # and large").
        cpu=Batches(1, 2, 4, 1024), cuda=Batches(256, 256, 256, 98304, baseline_max_tokens=8192),
        steps={"cpu": 3, "cuda": 10}, warmup={"cpu": 1, "cuda": 2},
    ),
    "large": _from_preset(
        "large", 250_002, xlco_max_length=256,
        # Both sides live on one 80 GB card: infoxlm's 16,384-token micro-batches fit beside
        # the baseline's 8,192; 32,768 beside it, or the baseline at 16,384, do not (see
        # BENCHMARKS.md, "GPU: one H100, base and large").
        cpu=Batches(1, 1, 2, 1024), cuda=Batches(256, 256, 256, 16384, baseline_max_tokens=8192),
        steps={"cpu": 2, "cuda": 5}, warmup={"cpu": 1, "cuda": 2},
    ),
}


def bench_size(name: str) -> BenchSize:
    if name not in SIZES:
        raise BenchError(f"--size {name!r}: expected one of {', '.join(SIZES)}")
    return SIZES[name]
