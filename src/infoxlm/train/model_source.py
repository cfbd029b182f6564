"""A model argument, whichever of the three forms it takes.

Every command that takes a model (``embed``, ``eval tatoeba``, ``finetune``, ``export``,
``pretrain --init``) names it with one path, read here:

- a Hugging Face XLM-R directory: ``config.json`` + weights (+ tokenizer files);
- a sentence-transformers export: ``modules.json`` names its Transformer module's directory
  (the weights) and its Pooling module (mean or cls);
- a run directory of ``infoxlm pretrain``: its latest checkpoint (or ``step``), checked against
  its digests and written out as ``infoxlm export`` writes it (train/export.py), with the run's
  tokenizer and the layer XLCO contrasted.

A directory that holds a Hugging Face model and a run's ``checkpoints/`` as well is two models
in one path: it is refused unless ``step`` picks a checkpoint, since either reading, chosen
silently, may be weights the user did not mean.

``resolve_model`` says which, reading small files only; ``open_model`` makes a Hugging Face
directory of it for the command to load (a run's for as long as the ``with`` block lasts) and
picks the default layer by the one rule of model/sentence_layer.py. This lives in ``train``
because reading a run needs its checkpoints; eval and finetune reach runs through it.

Example::

    >>> with open_model("runs/base") as model:  # doctest: +SKIP
    ...     layer, rule = model.layer(None)
    ...     encoder = Encoder.from_pretrained(model.directory)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import CheckpointError, InfoXLMError
from ..json_files import CONFIG_BYTES, read_json
from ..model.config import EncoderConfig
from ..model.hub import PICKLE_WEIGHTS_NAME, SHARD_INDEX_NAME, WEIGHTS_NAME, read_contrast_layer, recorded_layer_rule
from ..model.sentence_layer import POOLINGS, RECORDED_CONTRAST_LAYER, default_layer
from ..outputs import is_run_directory, is_token_store
from ..tokenizer import SENTENCEPIECE_MODEL, TOKENIZER_JSON, Tokenizer
from .checkpoint import CHECKPOINT_DIR, checkpoint_path, list_checkpoints
from .export import export_checkpoint

__all__ = ["HUGGING_FACE", "RUN", "SENTENCE_TRANSFORMERS", "ModelSource", "OpenedModel", "open_model", "resolve_model"]

HUGGING_FACE, SENTENCE_TRANSFORMERS, RUN = "Hugging Face directory", "sentence-transformers export", "run directory"
# sentence-transformers' 1_Pooling/config.json flags → the mode's name.
_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len", "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class ModelSource:
    """What a model argument names, read from its small files (no weights).

    ``weights``: the directory with config.json and the weights (None for a run, whose
    checkpoint ``open_model`` writes out); ``tokenizer``: where its tokenizer files are (None
    when it has none); ``step``: a run's checkpoint step; ``pooling`` and ``pooling_file``: a
    sentence-transformers export's pooling mode and the file that records it."""

    path: Path
    kind: str
    weights: Path | None
    tokenizer: Path | None
    step: int | None = None
    pooling: str | None = None
    pooling_file: Path | None = None

    def describe(self) -> str:
        """``runs/base (run directory, checkpoint step 6)``: the model in words, for messages."""
        return f"{self.path} ({self.kind}" + (f", checkpoint step {self.step})" if self.step is not None else ")")


def resolve_model(
    path: str | Path, step: int | None = None, *, flag: str = "--model", step_flag: str | None = "--step N"
) -> ModelSource:
    """Which of the three forms ``path`` is; a path that is none of them, a run without
    checkpoints, a ``step`` for anything but a run and a Hugging Face directory that also holds
    checkpoints without a ``step`` are ``InfoXLMError``s in one line. ``step_flag``: how the
    caller picks a run's checkpoint, for that last message (None where it cannot)."""
    path = Path(path)
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise InfoXLMError(f"{flag} {path}: {what}; expected {_THREE_FORMS}")
    if (path / CHECKPOINT_DIR).is_dir() and step is None and not is_run_directory(path):
        _refuse_two_models(path, flag, step_flag)
    if is_run_directory(path) or (path / CHECKPOINT_DIR).is_dir():
        return _run_source(path, step)
    if step is not None:
        kind = SENTENCE_TRANSFORMERS if os.path.lexists(path / "modules.json") else HUGGING_FACE
        raise InfoXLMError(f"--step {step}: {path} is a {kind}, not a run directory with checkpoints")
    if os.path.lexists(path / "modules.json"):  # what is there but no regular file is named when read
        return _sentence_transformers_source(path)
    if is_token_store(path):
        raise InfoXLMError(f"{flag} {path}: is a token store (what `infoxlm prepare` writes), not a model; expected {_THREE_FORMS}")
    if not os.path.lexists(path / "config.json"):
        raise InfoXLMError(f"{flag} {path}: no config.json, modules.json or checkpoints/; expected {_THREE_FORMS}")
    return ModelSource(path, HUGGING_FACE, weights=path, tokenizer=path if _has_tokenizer(path) else None)


_THREE_FORMS = "a Hugging Face XLM-R directory, a sentence-transformers export or an `infoxlm pretrain` run directory"


def _refuse_two_models(path: Path, flag: str, step_flag: str | None) -> None:
    """``path`` holds checkpoints/ beside a Hugging Face config.json and weights: which one the
    user means is theirs to say (a step picks a checkpoint), never a guess."""
    weights = next((name for name in (WEIGHTS_NAME, SHARD_INDEX_NAME, PICKLE_WEIGHTS_NAME) if (path / name).is_file()), None)
    if weights is None or not (path / "config.json").is_file():
        return  # no Hugging Face model beside the checkpoints: a run (an earlier release's, or one begun)
    steps = [s for s, _ in list_checkpoints(path)]
    hf = f"move {CHECKPOINT_DIR}/ out of it to read the Hugging Face model"
    if not steps:
        checkpoints, how = f"{path / CHECKPOINT_DIR}, no complete step-N yet", hf
    elif step_flag is not None:
        checkpoints, how = f"{path / CHECKPOINT_DIR}, steps {steps}", f"pass {step_flag} to read a checkpoint, or {hf}"
    else:
        checkpoints = f"{path / CHECKPOINT_DIR}, steps {steps}"
        how = f"{hf}, or pass the output of `infoxlm export {path} OUT --step N` to read a checkpoint"
    raise InfoXLMError(
        f"{flag} {path}: holds both a Hugging Face model (config.json, {weights}) and a run's checkpoints ({checkpoints}); {how}"
    )


def _run_source(run: Path, step: int | None) -> ModelSource:
    found = list_checkpoints(run)
    if not found:
        raise InfoXLMError(
            f"{run}: a run directory with no checkpoint yet ({run / CHECKPOINT_DIR} holds no complete step-N); "
            "a run writes one every run.save_every steps and when it stops"
        )
    if step is None:
        step = found[-1][0]
    elif not checkpoint_path(run, step).is_dir():
        raise InfoXLMError(f"--step {step}: {run} has no checkpoint of that step; available: {[s for s, _ in found]}")
    tokenizer = run / "tokenizer"
    return ModelSource(run, RUN, weights=None, tokenizer=tokenizer if _has_tokenizer(tokenizer) else None, step=step)


def _sentence_transformers_source(path: Path) -> ModelSource:
    """The Transformer module's directory and the Pooling module's mode, from modules.json."""
    modules_file = path / "modules.json"
    modules = read_json(modules_file, what="sentence-transformers' modules.json", max_bytes=CONFIG_BYTES)
    try:
        paths = {str(m["type"]).rsplit(".", 1)[-1]: path / str(m.get("path", "")) for m in modules}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InfoXLMError(f"{modules_file}: not a list of modules with a type and a path, as sentence-transformers writes it") from None
    if "Transformer" not in paths:
        raise InfoXLMError(f"{modules_file}: names no sentence_transformers.models.Transformer module (the weights)")
    pooling = pooling_file = None
    if "Pooling" in paths:
        pooling_file = paths["Pooling"] / "config.json"
        flags = read_json(pooling_file, what="sentence-transformers' Pooling config", max_bytes=CONFIG_BYTES)
        try:
            pooling = next(name for key, name in _POOLING_FLAGS.items() if flags.get(key) is True)
        except (AttributeError, StopIteration):
            raise InfoXLMError(f"{pooling_file}: no pooling_mode_* set to true; expected sentence-transformers' Pooling config") from None
    weights = paths["Transformer"]
    return ModelSource(path, SENTENCE_TRANSFORMERS, weights=weights, tokenizer=weights if _has_tokenizer(weights) else None,
                       pooling=pooling, pooling_file=pooling_file)


def _has_tokenizer(directory: Path) -> bool:
    return any((directory / name).is_file() for name in (TOKENIZER_JSON, SENTENCEPIECE_MODEL))


@dataclass(frozen=True)
class OpenedModel:
    """A model argument as a Hugging Face directory (``directory``: config.json, weights and,
    where the source has one, the tokenizer), its encoder config and the layer it records."""

    source: ModelSource
    directory: Path
    config: EncoderConfig
    recorded_layer: int | None
    recorded_rule: str = RECORDED_CONTRAST_LAYER  # how the recorded layer is named (hub.recorded_layer_rule)

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    def default_layer(self) -> tuple[int, str]:
        """The one rule (model/sentence_layer.py): for a sentence-transformers export, the layer
        it was cut at (its last, what its ``encode`` pools); else the contrast layer recorded."""
        if self.source.kind == SENTENCE_TRANSFORMERS:
            return default_layer(self.num_layers, self.num_layers, "the layer the sentence-transformers export pools, its last")
        return default_layer(self.num_layers, self.recorded_layer, self.recorded_rule)

    def layer(self, requested: int | None, flag: str = "--layer") -> tuple[int, str]:
        """(hidden_states index, rule): ``requested`` checked against the depth, or the default."""
        if requested is None:
            return self.default_layer()
        L = self.num_layers
        if not 0 <= requested <= L:
            # A run's config.json is a temporary copy: name the run instead.
            where = f"{self.source.describe()} has" if self.source.kind == RUN else f"{self.directory / 'config.json'} gives"
            raise InfoXLMError(f"{flag} {requested}: {where} {L} layers; expected 0 (embedding output) … {L} (last layer)")
        return requested, flag

    def pooling(self, requested: str | None, flag: str = "--pooling") -> str:
        """``requested``, else the pooling a sentence-transformers export records, else mean."""
        if requested is not None:
            return requested
        recorded = self.source.pooling
        if recorded is None:
            return "mean"
        if recorded not in POOLINGS:
            raise InfoXLMError(
                f"{self.source.pooling_file}: pooling {recorded!r}; infoxlm pools mean or cls: pass {flag} mean or {flag} cls"
            )
        return recorded

    def tokenizer(self, purpose: str) -> Tokenizer:
        """The model's tokenizer. A run without one is refused here, naming the run and what
        needed it (``Tokenizer.from_pretrained`` would name a temporary copy)."""
        if self.source.kind == RUN and self.source.tokenizer is None:
            raise InfoXLMError(f"{self.source.describe()}: has no tokenizer/ (its store had none); {purpose} needs one")
        return Tokenizer.from_pretrained(self.directory)

    def says(self, layer: int, rule: str, pooling: str | None = None) -> str:
        """The model and the layer (and pooling) a command used, and why, for its closing line:
        ``runs/base (run directory, checkpoint step 6), layer 1 (the contrast layer the model
        records), mean pooling``."""
        return f"{self.source.describe()}, layer {layer} ({rule})" + (f", {pooling} pooling" if pooling else "")


@contextmanager
def open_model(
    path: str | Path, step: int | None = None, *, into: Path | None = None, flag: str = "--model", step_flag: str | None = "--step N"
) -> Iterator[OpenedModel]:
    """``path`` (any of the three forms) as an ``OpenedModel``. A run's checkpoint is written
    out as ``infoxlm export`` writes it, into ``into`` (kept) or a temporary directory removed
    when the block ends; the other forms are read where they are."""
    source = resolve_model(path, step, flag=flag, step_flag=step_flag)
    if source.kind != RUN:
        yield _opened(source, source.weights)
    elif into is not None:
        yield _opened_run(source, step, into)
    else:
        with tempfile.TemporaryDirectory(prefix="infoxlm-model-") as tmp:
            yield _opened_run(source, step, Path(tmp) / "model")


def _opened_run(source: ModelSource, step: int | None, into: Path) -> OpenedModel:
    """A run's checkpoint written out into ``into``: ``step``'s, or the newest when it is read
    (a run still training may have replaced the one ``resolve_model`` saw; export.py)."""
    written = export_checkpoint(source.path, into, step=step)
    return _opened(replace(source, step=written), into)


def _opened(source: ModelSource, directory: Path) -> OpenedModel:
    if not (directory / "config.json").is_file():
        raise CheckpointError(f"{directory}: no config.json; {source.describe()} names its weights there")
    return OpenedModel(source, directory, EncoderConfig.load(directory), read_contrast_layer(directory), recorded_layer_rule(directory))
