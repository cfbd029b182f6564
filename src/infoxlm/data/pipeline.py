"""The training data of one optimizer step, for one rank: the engine's single entry point.

``DataPipeline(store, config).step(step, rank, world_size)`` returns this rank's
micro-batches of MMLM blocks, TLM pairs and XLCO views for that step, plus statistics.
What a rank receives is a pure function of (seed, step, rank, world size) and the store;
each example is a pure function of (seed, step, objective, slot), so the union of the
ranks' shares does not depend on the world size (see schedule.py). Nothing is cached
between steps: resuming at step k needs nothing but k.

Example:
    >>> from infoxlm.data.store import TokenStore
    >>> pipeline = DataPipeline(TokenStore.open("data/store"), PipelineConfig(seed=1))  # doctest: +SKIP
    >>> data = pipeline.step(step=0, rank=0, world_size=8)                              # doctest: +SKIP
    >>> for batch in data.mmlm:                                                         # doctest: +SKIP
    ...     batch = batch.to("cuda", non_blocking=True)
    ...     logits = model(batch.input_ids, batch.attention_mask, batch.masked_positions)  # (N, V)
    ...     loss = F.cross_entropy(logits, batch.targets, reduction="sum")
    >>> print(data.summary())                                                           # doctest: +SKIP
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .batching import ContrastBatch, MLMBatch, contrast_micro_batches, filler_contrast_batch, filler_mlm_batch, mlm_micro_batches
from .examples import ExampleBuilder
from .keyed_random import KeyedRandom
from .masking import MaskedSequences, check_mask_rates, mask_tokens
from .sampling import SAMPLING_UNITS, check_alpha, language_probabilities
from .schedule import MASK, MASK_KEY, OBJECTIVE_IDS, PairPlan, plan_blocks, plan_mixup, plan_pairs, rank_slots
from .multiway import PAIRINGS, PivotGroups
from .step_schedules import Piecewise, active_names, language_starts
from .store import StoreError, TokenStore

__all__ = ["DEFAULT_MAX_TOKENS", "FILLERS", "OBJECTIVES", "PipelineConfig", "DataPipeline", "StepData", "ObjectiveStats"]

# The pipeline's three streams of examples, named after the objectives they were made for:
# MMLM blocks, TLM concatenated pairs, XLCO pairs of views. An objective reads one of them.
OBJECTIVES = ("mmlm", "tlm", "xlco")
# Per stream, the one-row batch a rank runs when another has more micro-batches of it in a step.
FILLERS = {"mmlm": filler_mlm_batch, "tlm": filler_mlm_batch, "xlco": filler_contrast_batch}
DEFAULT_MAX_TOKENS = 16384


@dataclass(frozen=True)
class PipelineConfig:
    """Everything that decides the training examples. Defaults follow InfoXLM-base.

    Batch sizes are *global* (examples per optimizer step over all ranks) and 0 disables
    an objective. Lengths include the special tokens. ``max_tokens`` bounds one
    micro-batch's padded size (rows × longest row; both views for XLCO).
    """

    seed: int = 0
    alpha: float = 0.7  # p ∝ (n / N)^alpha over languages (mono) and over pairs (parallel)
    sampling_unit: str = "instances"  # n counts lines / pairs (the paper), or "tokens"
    mmlm_batch_size: int = 2048
    tlm_batch_size: int = 2048
    xlco_batch_size: int = 2048
    block_size: int = 512  # longest MMLM block, <s> line </s> line </s> …
    tlm_max_length: int = 512  # <s> a </s> b </s>
    xlco_max_length: int = 512  # one view, <s> c </s> d </s>; the authors' code allows about 511 tokens a view
    mask_prob: float = 0.15  # share of eligible tokens selected
    mask_token_prob: float = 0.8  # of the selected: → <mask>
    random_token_prob: float = 0.1  # of the selected: → random piece (rest unchanged)
    mixup: bool = True  # XLCO mixup contrast (paper §3.3)
    mask_xlco: bool = True  # mask the XLCO views too, at the same rates (as the authors' code)
    # Changing with the step (data/step_schedules.py), each None = constant as in the paper:
    mask_schedule: str | None = None  # "STEP:RATE,…" in place of mask_prob, e.g. "0:0.3,2000:0.15"
    alpha_schedule: str | None = None  # "STEP:ALPHA,…" in place of alpha, e.g. "0:0.7,2000:0.3"
    language_starts: str | None = None  # "LANG:STEP,…": languages sampled only from that step on
    # TLM / XLCO pairs as stored ("english": en–xx), or also xx–yy through a shared pivot
    # sentence for a share of them ("multiway", data/multiway.py).
    pairs: str = "english"
    multiway_share: float = 0.5
    pivot: str = "en"
    # Padded tokens per micro-batch. None: left to the trainer (a GPU run picks it from its
    # memory, train/token_budget.py); DEFAULT_MAX_TOKENS wherever nothing picks it.
    max_tokens: int | None = None

    def __post_init__(self):
        def integer(name: str, smallest: int) -> int:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < smallest:
                raise ValueError(f"{name} must be an integer >= {smallest}, got {value!r}")
            return int(value)

        integer("seed", 0)
        if self.seed >= 2**64:
            raise ValueError(f"seed must be below 2**64, got {self.seed}")
        check_alpha(self.alpha)
        if self.sampling_unit not in SAMPLING_UNITS:
            raise ValueError(f"sampling_unit must be one of {', '.join(SAMPLING_UNITS)}, got {self.sampling_unit!r}")
        for name in ("mmlm_batch_size", "tlm_batch_size", "xlco_batch_size"):
            integer(name, 0)
        integer("block_size", 3)
        integer("tlm_max_length", 5)
        integer("xlco_max_length", 5)
        if self.max_tokens is not None:
            integer("max_tokens", 1)
        check_mask_rates(self.mask_prob, self.mask_token_prob, self.random_token_prob)
        for rate in self._schedule("mask_schedule").values:
            check_mask_rates(rate, self.mask_token_prob, self.random_token_prob)
        for alpha in self._schedule("alpha_schedule").values:
            check_alpha(alpha)
        language_starts(self.language_starts)
        if self.pairs not in PAIRINGS:
            raise ValueError(f"pairs must be one of {', '.join(PAIRINGS)}, got {self.pairs!r}")
        share = self.multiway_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ValueError(f"multiway_share must be a number in [0, 1], got {share!r}")
        if not isinstance(self.pivot, str) or not self.pivot:
            raise ValueError(f"pivot must be a language code (en), got {self.pivot!r}")
        for name in ("mixup", "mask_xlco"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        # One example must fit a micro-batch (an XLCO example is both of its views).
        what = {"mmlm": "block_size", "tlm": "tlm_max_length", "xlco": "2 * xlco_max_length"}
        for objective in self.enabled:
            size = self.longest_example(objective)
            if size > self.effective_max_tokens:
                raise ValueError(
                    f"max_tokens={self.effective_max_tokens} is smaller than one {objective} example "
                    f"({what[objective]} = {size}); raise max_tokens to at least {size}"
                )

    def batch_size(self, objective: str) -> int:
        return getattr(self, f"{objective}_batch_size")

    def only(self, stream: str, seed: int) -> "PipelineConfig":
        """This config drawing ``stream``'s examples alone, from ``seed``: an objective's own
        draws (XLCO's queue pre-fill), apart from training's."""
        return dataclasses.replace(self, seed=seed, **{f"{o}_batch_size": 0 for o in OBJECTIVES if o != stream})

    def _schedule(self, name: str) -> Piecewise:
        """``name``'s schedule, or the constant field it replaces (mask_prob, alpha)."""
        text = getattr(self, name)
        if text is None:
            return Piecewise((0,), (float(self.mask_prob if name == "mask_schedule" else self.alpha),))
        return Piecewise.parse(text, name)

    def mask_rate(self, step: int) -> float:
        """The share of eligible tokens masked at ``step``."""
        return self._schedule("mask_schedule").at(step)

    def alpha_at(self, step: int) -> float:
        """The sampling exponent at ``step``."""
        return self._schedule("alpha_schedule").at(step)

    @property
    def highest_mask_rate(self) -> float:
        """The largest mask rate of the run (what memory estimates must allow for)."""
        return max(self._schedule("mask_schedule").values)

    def longest_example(self, objective: str) -> int:
        """Tokens of the objective's longest example (both views for XLCO)."""
        return {"mmlm": self.block_size, "tlm": self.tlm_max_length, "xlco": 2 * self.xlco_max_length}[objective]

    @property
    def effective_max_tokens(self) -> int:
        """The micro-batch budget in force: ``max_tokens``, or DEFAULT_MAX_TOKENS where unset."""
        return DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens

    @property
    def enabled(self) -> tuple[str, ...]:
        """The objectives with a positive batch size, in the order mmlm, tlm, xlco."""
        return tuple(o for o in OBJECTIVES if self.batch_size(o) > 0)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ObjectiveStats:
    """One objective's share of a step on one rank."""

    num_examples: int = 0
    num_micro_batches: int = 0
    num_tokens: int = 0  # real tokens (both views for XLCO)
    num_positions: int = 0  # padded tensor positions
    num_masked: int = 0
    corpus_counts: dict[str, int] = field(default_factory=dict)  # examples per language / pair

    @property
    def num_padding(self) -> int:
        return self.num_positions - self.num_tokens

    @property
    def padding_fraction(self) -> float:
        """pad positions / all positions of the built tensors."""
        return self.num_padding / self.num_positions if self.num_positions else 0.0


@dataclass
class StepData:
    """One rank's data for one step: micro-batches per objective (empty list: disabled) + stats."""

    step: int
    rank: int
    world_size: int
    mmlm: list[MLMBatch]
    tlm: list[MLMBatch]
    xlco: list[ContrastBatch]
    stats: dict[str, ObjectiveStats]
    seconds: float  # time spent building this step's data

    def batches(self, stream: str) -> list:
        """The micro-batches of one stream ("mmlm", "tlm" or "xlco")."""
        return getattr(self, stream)

    def pin_memory(self) -> "StepData":
        """This step's micro-batches in page-locked host memory (their copies to a GPU then
        run without the host waiting for the device)."""
        pin = lambda batches: [b.pin_memory() for b in batches]  # noqa: E731
        return dataclasses.replace(self, mmlm=pin(self.mmlm), tlm=pin(self.tlm), xlco=pin(self.xlco))

    @property
    def padding_fraction(self) -> float:
        positions = sum(s.num_positions for s in self.stats.values())
        return sum(s.num_padding for s in self.stats.values()) / positions if positions else 0.0

    def summary(self) -> str:
        parts = [
            f"{name} {s.num_examples} ex / {s.num_micro_batches} mb / {s.num_masked} masked / "
            f"pad {100 * s.padding_fraction:.1f}%"
            for name, s in self.stats.items()
            if s.num_examples
        ]
        return f"step {self.step} rank {self.rank}/{self.world_size}: " + ", ".join(parts) + f" ({1e3 * self.seconds:.0f} ms)"


class DataPipeline:
    """Deterministic MMLM / TLM / XLCO micro-batches from a token store.

    Args:
        store: an open :class:`TokenStore`.
        config: a :class:`PipelineConfig`.

    Raises:
        StoreError: an enabled objective needs data the store lacks (monolingual text for
            MMLM, translation pairs for TLM / XLCO, two pairs for mixup).
    """

    def __init__(self, store: TokenStore, config: PipelineConfig | None = None):
        config = PipelineConfig() if config is None else config
        if not isinstance(config, PipelineConfig):
            raise ValueError(f"config must be a PipelineConfig, got {type(config).__name__}")
        self.store = store
        self.config = config
        try:
            self.vocab_size = store.vocab_size
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"{store.root}/store.json: no tokenizer vocab_size recorded") from None
        self.builder = ExampleBuilder(store, config.block_size, config.tlm_max_length, config.xlco_max_length)
        b = self.builder
        enabled = config.enabled
        mono_sizes, pair_sizes = store.sampling_sizes(config.sampling_unit)

        if "mmlm" in enabled:
            if not b.mono_tokens.sum():
                raise StoreError(
                    f"{store.root}: no monolingual text, but mmlm_batch_size={config.mmlm_batch_size}; "
                    "prepare monolingual corpora or set mmlm_batch_size=0"
                )
        wants_pairs = [o for o in ("tlm", "xlco") if o in enabled]
        if wants_pairs:
            if not b.parallel_tokens.sum():
                asked = ", ".join(f"{o}_batch_size={config.batch_size(o)}" for o in wants_pairs)
                raise StoreError(
                    f"{store.root}: no parallel corpora (translation pairs), but {asked} need them; "
                    f"prepare parallel data or set {' and '.join(o + '_batch_size=0' for o in wants_pairs)}"
                )
            non_empty = np.flatnonzero(b.parallel_tokens)
            if "xlco" in enabled and config.mixup and len(non_empty) == 1 and b.num_pairs[non_empty[0]] < 2:
                raise StoreError(
                    f"{store.root}: mixup contrast needs a second translation pair to mix with, but the store holds "
                    f"one pair ({b.pairs[non_empty[0]]}); add parallel data or set mixup=False"
                )
        self._sizes = (mono_sizes if "mmlm" in enabled else {}, pair_sizes if wants_pairs else {})
        self._corpus_languages = (
            [(x,) for x in b.languages], [tuple(store.parallel[x].languages) for x in b.pairs],
        )  # fmt: skip
        self._starts = language_starts(config.language_starts)
        self._check_language_starts()
        self._by_schedule: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._mono_p, self._pair_p = self._probabilities(0)
        self.pivot_groups = None
        if config.pairs == "multiway" and wants_pairs:
            sides = [tuple(zip(p.tokens, p.offsets)) for p in b.parallel]
            self.pivot_groups = PivotGroups(sides, self._corpus_languages[1], config.pivot)
        # What step 0 samples, for the console and the model card.
        self.language_probabilities = {x: float(p) for x, p in zip(b.languages, self._mono_p) if x in self._sizes[0]}
        self.pair_probabilities = {x: float(p) for x, p in zip(b.pairs, self._pair_p) if x in self._sizes[1]}

    def _check_language_starts(self) -> None:
        """Every language ``language_starts`` names is in the store, and each objective has a
        corpus to draw from at step 0."""
        held = {x for names in self._corpus_languages[0] + self._corpus_languages[1] for x in names}
        unknown = sorted(set(self._starts) - held)
        if unknown:
            raise StoreError(
                f"{self.store.root}: data.language_starts names {', '.join(unknown)}, which the store does not hold "
                f"(it holds {', '.join(sorted(held))})"
            )
        for sizes, languages, what in zip(self._sizes, self._corpus_languages, ("monolingual", "parallel")):
            if sizes and not any(active_names(languages, self._starts, 0)):
                raise StoreError(f"{self.store.root}: data.language_starts leaves no {what} corpus to sample at step 0")

    def _probabilities(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(p over the builder's languages, p over its parallel corpora) at ``step``: α of the
        step over the corpora whose languages have started; each pair computed once."""
        alpha = self.config.alpha_at(step)
        names = (self.builder.languages, self.builder.pairs)
        active = tuple(active_names(languages, self._starts, step) for languages in self._corpus_languages)
        key = (alpha, active)
        if key not in self._by_schedule:
            drawn = []
            for sizes, corpora, on in zip(self._sizes, names, active):
                kept = {x: sizes[x] for x, live in zip(corpora, on) if live and x in sizes}
                p = language_probabilities(kept, alpha) if kept else {}
                drawn.append(np.array([p.get(x, 0.0) for x in corpora]))
            self._by_schedule[key] = (drawn[0], drawn[1])
        return self._by_schedule[key]

    def with_max_tokens(self, max_tokens: int) -> "DataPipeline":
        """This pipeline cutting its micro-batches to another budget; the store is not read
        again (the budget decides how examples are grouped, not which)."""
        cut = copy.copy(self)
        cut.config = dataclasses.replace(self.config, max_tokens=max_tokens)
        return cut

    # ------------------------------------------------------------------------------------
    def step(self, step: int, rank: int = 0, world_size: int = 1) -> StepData:
        """This rank's micro-batches for optimizer step ``step``.

        The rank holds the contiguous slots [⌊G·r/W⌋, ⌊G·(r+1)/W⌋) of each objective's
        global batch G (shares differ by at most one example; with G < W some ranks get none).
        """
        for name, value, smallest in (("step", step, 0), ("world_size", world_size, 1), ("rank", rank, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < smallest:
                raise ValueError(f"{name} must be an integer >= {smallest}, got {value!r}")
        if rank >= world_size:
            raise ValueError(f"rank must be < world_size, got rank={rank}, world_size={world_size}")
        started = time.perf_counter()
        batches: dict[str, list] = {o: [] for o in OBJECTIVES}
        stats = {o: ObjectiveStats() for o in OBJECTIVES}
        budget = self.config.effective_max_tokens
        for objective in self.config.enabled:
            slots = rank_slots(self.config.batch_size(objective), rank, world_size)
            if len(slots) == 0:
                continue
            if objective == "xlco":
                query, key, counts = self.examples(objective, step, slots)
                batches[objective] = contrast_micro_batches(query, key, slots, budget)
            else:
                sequences, counts = self.examples(objective, step, slots)
                batches[objective] = mlm_micro_batches(sequences, slots, budget)
            made = batches[objective]
            stats[objective] = ObjectiveStats(
                num_examples=len(slots),
                num_micro_batches=len(made),
                num_tokens=sum(b.num_tokens for b in made),
                num_positions=sum(b.num_positions for b in made),
                num_masked=sum(b.num_masked for b in made),
                corpus_counts=counts,
            )
        seconds = time.perf_counter() - started
        return StepData(step, rank, world_size, batches["mmlm"], batches["tlm"], batches["xlco"], stats, seconds)

    def examples(self, objective: str, step: int, slots: np.ndarray):
        """The masked, unbatched examples of ``slots`` (for inspection and tests).

        Returns (sequences, counts) for mmlm / tlm and (query, key, counts) for xlco, rows
        in the order of ``slots``; counts maps corpus name → examples drawn from it.
        """
        rng, plan = self._plan(objective, step, slots)
        cfg, b = self.config, self.builder
        rate = cfg.mask_rate(step)
        if objective == "mmlm":
            return self._mask(b.mmlm(plan), rng.bits(MASK), True, rate), _counts(b.languages, plan.language)
        if objective == "tlm":
            return self._mask(b.tlm(plan), rng.bits(MASK), True, rate), _counts(b.pairs, plan.corpus)
        query, key = b.xlco(plan)
        # XLCO views are not predicted (the loss is the contrast), so no forced mask.
        rate = rate if cfg.mask_xlco else 0.0
        query = self._mask(query, rng.bits(MASK), False, rate)
        key = self._mask(key, rng.bits(MASK_KEY), False, rate)
        return query, key, _counts(b.pairs, plan.pair.corpus)

    def sources(self, objective: str, step: int, slots: np.ndarray) -> list[str]:
        """Where each slot's example comes from: ``de block 17``, ``en-de pair 3 (de→en)``,
        and for XLCO with mixup also its partner pair."""
        _, plan = self._plan(objective, step, slots)
        b = self.builder
        if objective == "mmlm":
            return [f"{b.languages[l]} block {k}" for l, k in zip(plan.language.tolist(), plan.block.tolist())]
        pairs = plan if objective == "tlm" else plan.pair

        def describe(p: PairPlan) -> list[str]:
            first, second = p.parts(p.swap)
            language = lambda part, i: self.store.parallel[b.pairs[part[0][i]]].languages[part[2][i]]  # noqa: E731
            names = []
            for i in range(len(slots)):
                name = f"{b.pairs[p.corpus[i]]} pair {p.index[i]}"
                if p.replace_side is not None and p.replace_side[i] >= 0:  # multi-way
                    name += f" via {self.config.pivot} to {b.pairs[p.with_corpus[i]]} pair {p.with_index[i]}"
                names.append(f"{name} ({language(first, i)}→{language(second, i)})")
            return names

        names = describe(pairs)
        if objective == "xlco" and plan.partner is not None:
            names = [f"{name}, mixed with {partner}" for name, partner in zip(names, describe(plan.partner))]
        return names

    def _plan(self, objective: str, step: int, slots: np.ndarray):
        """(the slots' random streams, the objective's plan) for ``step``."""
        if objective not in OBJECTIVE_IDS:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        cfg, b = self.config, self.builder
        rng = KeyedRandom(cfg.seed, OBJECTIVE_IDS[objective], step, slots)
        mono_p, pair_p = self._probabilities(step)
        if objective == "mmlm":
            if not self._mono_p.sum():
                raise ValueError("mmlm is disabled (mmlm_batch_size=0) in this pipeline's config")
            return rng, plan_blocks(rng, mono_p, b.num_blocks)
        if not self._pair_p.sum():
            raise ValueError(f"{objective} is disabled (tlm_batch_size and xlco_batch_size are 0) in this config")
        if objective == "tlm":
            return rng, self._through_pivot(rng, plan_pairs(rng, pair_p, b.num_pairs))
        plan = plan_mixup(rng, pair_p, b.num_pairs, cfg.mixup)
        plan.pair = self._through_pivot(rng, plan.pair)
        return rng, plan

    def _through_pivot(self, rng: KeyedRandom, plan: PairPlan) -> PairPlan:
        """``plan`` with data.multiway_share of its pairs made xx–yy (``data.pairs=multiway``)."""
        if self.pivot_groups is None:
            return plan
        return self.pivot_groups.apply(rng, plan, self.config.multiway_share)

    def _mask(self, sequences, streams, at_least_one: bool, rate: float) -> MaskedSequences:
        cfg = self.config
        return mask_tokens(
            sequences, streams, self.vocab_size, rate, cfg.mask_token_prob, cfg.random_token_prob, at_least_one
        )


def _counts(names: list[str], chosen: np.ndarray) -> dict[str, int]:
    counts = np.bincount(chosen, minlength=len(names))
    return {name: int(c) for name, c in zip(names, counts) if c}
