"""Read and write Hugging Face XLM-R checkpoint directories.

A directory holds ``config.json`` and the weights, as ``model.safetensors`` (possibly sharded,
with ``model.safetensors.index.json``) or the older ``pytorch_model.bin``. The weight names are
the encoder's own parameter names, with the body under a ``roberta.`` prefix in masked-LM
checkpoints and without it in bare-model ones; this module only adds or removes that prefix.
Pickled ``.bin`` files are read with ``weights_only=True``: no code in a checkpoint ever runs.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..errors import CheckpointError, InfoXLMError
from ..json_files import CONFIG_BYTES, RECORD_BYTES, read_json
from .config import WRITER_KEY, EncoderConfig
from .sentence_layer import RECORDED_CONTRAST_LAYER

if TYPE_CHECKING:
    from ..tokenizer import Tokenizer

log = logging.getLogger(__name__)

BODY_PREFIX = "roberta."  # where Hugging Face's XLMRobertaFor* classes keep the encoder's weights
WEIGHTS_NAME = "model.safetensors"
SHARD_INDEX_NAME = "model.safetensors.index.json"
PICKLE_WEIGHTS_NAME = "pytorch_model.bin"
# Buffers some transformers versions wrote into checkpoints; they hold no weights.
IGNORED_KEYS = {"embeddings.position_ids", "embeddings.token_type_ids"}
# The decoder matrix is the word-embedding matrix (tied); it is never read or written.
TIED_KEY = "lm_head.decoder.weight"


# What `infoxlm export` writes into a model directory (both formats): anything else in a
# directory belongs to someone else, and the directory is not replaced without --overwrite.
EXPORT_ENTRIES = frozenset({
    "config.json", WEIGHTS_NAME, "README.md",
    "tokenizer.json", "sentencepiece.bpe.model", "tokenizer_config.json", "special_tokens_map.json",
    "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling",
})


def written_by_infoxlm(directory: str | Path) -> bool:
    """Whether ``directory`` is a model directory infoxlm wrote and holds nothing else: its
    config.json names infoxlm as the writer and every entry is one an export writes."""
    directory = Path(directory)
    try:
        fields = read_json(directory / "config.json", what="a config.json", max_bytes=CONFIG_BYTES)
        names = {entry.name for entry in directory.iterdir()}
    except (OSError, InfoXLMError):
        return False
    return isinstance(fields, dict) and WRITER_KEY in fields and names <= EXPORT_ENTRIES


def read_checkpoint_tensors(directory: str | Path, map_location: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """All tensors in a checkpoint directory, under the names the file gives them."""
    tensors: dict[str, torch.Tensor] = {}
    for path in _weight_files(directory):
        if path.name == PICKLE_WEIGHTS_NAME:
            tensors.update(_read_pickle(path, map_location))
        else:
            tensors.update(_read_safetensors(path, map_location))
    return tensors


def read_weight_shapes(directory: str | Path) -> dict[str, tuple[tuple[int, ...], Path]]:
    """Name → (shape, file) of every tensor in a checkpoint directory, without reading one:
    safetensors headers only; a pickle is unpickled onto the meta device (no storage)."""
    shapes: dict[str, tuple[tuple[int, ...], Path]] = {}
    for path in _weight_files(directory):
        if path.name == PICKLE_WEIGHTS_NAME:
            shapes.update({k: (tuple(v.shape), path) for k, v in _read_pickle(path, "meta").items()})
            continue
        try:
            with safe_open(path, framework="pt") as file:
                shapes.update({k: (tuple(file.get_slice(k).get_shape()), path) for k in file.keys()})
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from None
    return shapes


def _weight_files(directory: str | Path) -> list[Path]:
    """The weight files of a checkpoint directory: one safetensors file, the shards an index
    names, or one pickle."""
    directory = Path(directory)
    if (directory / WEIGHTS_NAME).is_file():
        return [directory / WEIGHTS_NAME]
    if os.path.lexists(directory / SHARD_INDEX_NAME):  # what is there but no regular file is named when read
        index_path = directory / SHARD_INDEX_NAME
        index = read_json(index_path, what="a safetensors shard index", max_bytes=RECORD_BYTES, error=CheckpointError)
        try:
            shard_names = sorted(set(index["weight_map"].values()))
        except (KeyError, AttributeError, TypeError) as err:
            raise CheckpointError(f"{index_path}: not a safetensors shard index ({err})") from None
        missing = [name for name in shard_names if not (directory / name).is_file()]
        if missing:
            raise CheckpointError(f"{directory / missing[0]}: shard named in {index_path.name} is missing")
        return [directory / name for name in shard_names]
    if (directory / PICKLE_WEIGHTS_NAME).is_file():
        return [directory / PICKLE_WEIGHTS_NAME]
    raise CheckpointError(
        f"{directory}: no weights found; expected {WEIGHTS_NAME}, {SHARD_INDEX_NAME} or {PICKLE_WEIGHTS_NAME}"
    )


def _read_pickle(path: Path, map_location: str | torch.device) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        raise CheckpointError(_pickle_refusal(path, err)) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: expected a dict of tensors (a state dict)")
    return state


def _pickle_refusal(path: Path, err: BaseException) -> str:
    """Why a pickled checkpoint was not read, and what to do instead (not torch's advice to pass
    weights_only=False: that would run whatever code the file names)."""
    text = str(err)
    if "Weights only load failed" not in text:
        first_line = text.strip().splitlines()[0] if text.strip() else type(err).__name__
        return f"{path}: not a readable PyTorch checkpoint ({first_line})"
    found = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"global `?([\w.]+)", text)
    what = f" (it names {found.group(1)})" if found else ""
    return (
        f"{path}: refused: this pickle holds more than tensors{what}, and loading it would run code "
        f"from the file; infoxlm reads only plain tensors. Convert it to {WEIGHTS_NAME} with a tool "
        "you trust, on a machine where running that file is safe"
    )


def _read_safetensors(path: Path, map_location: str | torch.device) -> dict[str, torch.Tensor]:
    try:
        return load_file(path, device=str(map_location))
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from None


def read_encoder_config(directory: str | Path) -> EncoderConfig:
    """The ``config.json`` of a Hugging Face XLM-R directory, checked before any weight is read."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a directory; expected a Hugging Face XLM-R checkpoint directory")
    return EncoderConfig.load(directory)


def check_weights_fit(encoder: torch.nn.Module, directory: str | Path) -> dict[str, str]:
    """Refuse weights whose names or shapes disagree with ``encoder``; read from the files'
    headers alone, so an encoder built on the meta device checks a directory before anything is
    allocated. Returns the encoder key → the tensor's name in the file, for every key found."""
    directory = Path(directory)
    file_shapes = read_weight_shapes(directory)
    expected = {k: tuple(v.shape) for k, v in encoder.state_dict().items() if k != TIED_KEY}

    # Checkpoint names → the encoder's: drop the body prefix; older files call the head's bias
    # lm_head.decoder.bias.
    file_name: dict[str, str] = {}
    ignored: list[str] = []
    for name in file_shapes:
        key = name[len(BODY_PREFIX):] if name.startswith(BODY_PREFIX) else name
        if key == "lm_head.decoder.bias":
            key = "lm_head.bias"
        if key in expected:
            file_name.setdefault(key, name)
        elif key not in IGNORED_KEYS and key != TIED_KEY:
            ignored.append(name)

    _check_complete(expected, file_name, directory)
    for key, name in file_name.items():
        shape, path = file_shapes[name]
        if shape != expected[key]:
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {shape}, but {directory / 'config.json'} "
                f"implies {expected[key]}"
            )
    if ignored:
        log.warning("%s: ignoring %d tensors that are not part of XLM-R: %s", directory, len(ignored), _short(ignored))
    return file_name


def load_weights(encoder: torch.nn.Module, directory: str | Path, map_location: str | torch.device = "cpu") -> None:
    """Fill an encoder built from the directory's config with its weights; see ``Encoder.from_pretrained``.

    ``encoder`` is an :class:`~infoxlm.model.encoder.Encoder` (taken as a module, so that
    this file does not depend on the class that calls it).
    """
    file_name = check_weights_fit(encoder, directory)
    tensors = read_checkpoint_tensors(directory, map_location)
    found = {key: tensors[name] for key, name in file_name.items()}
    # Weights absent from the file (head or pooler) keep the fresh initialisation; the tied
    # decoder is the word-embedding matrix, loaded as such.
    encoder.load_state_dict(found, strict=False)
    encoder.loaded_parts = {part for part in ("lm_head", "pooler") if f"{part}.dense.weight" in found}


def _check_complete(expected: dict[str, tuple[int, ...]], found: dict[str, str], directory: Path) -> None:
    """The body must be whole; the head and the pooler are optional, but all-or-nothing."""
    groups = {
        "body": [k for k in expected if not k.startswith(("lm_head.", "pooler."))],
        "lm_head": [k for k in expected if k.startswith("lm_head.")],
        "pooler": [k for k in expected if k.startswith("pooler.")],
    }
    for group, keys in groups.items():
        missing = [k for k in keys if k not in found]
        if not missing:
            continue
        if group == "body" or len(missing) < len(keys):
            raise CheckpointError(
                f"{directory}: {len(missing)} {group} tensor(s) missing, e.g. {_short(missing)}; "
                "expected every weight of an XLM-R encoder of the size config.json gives"
            )
        log.info("%s: no %s weights; they start freshly initialised", directory, group)


def _short(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def save_encoder(
    encoder: torch.nn.Module,
    directory: str | Path,
    tokenizer: "Tokenizer | None" = None,
    include_mlm_head: bool = True,
) -> Path:
    """Write an encoder's ``config.json`` + ``model.safetensors`` (+ tokenizer files) for transformers.

    Two layouts, each matching its transformers class weight for weight:
    - masked LM (default), ``XLMRobertaForMaskedLM``'s: the body under ``roberta.``, the head
      under ``lm_head.``; the pooler only if it was loaded from a checkpoint (a pooler that was
      never trained is not worth a warning about unused weights in transformers);
    - bare model (``include_mlm_head=False``), ``XLMRobertaModel``'s (``AutoModel``): body and
      pooler, no prefix.
    The weights file is written under a temporary name and renamed, so a crash never leaves a
    truncated file behind.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_pooler = not include_mlm_head or "pooler" in encoder.loaded_parts
    tensors: dict[str, torch.Tensor] = {}
    for key, tensor in encoder.state_dict().items():
        if key == TIED_KEY:
            continue
        if key.startswith("lm_head."):
            if not include_mlm_head:
                continue
            name = key
        elif key.startswith("pooler.") and not write_pooler:
            continue
        else:
            name = BODY_PREFIX + key if include_mlm_head else key
        tensors[name] = tensor.detach().to("cpu").contiguous()
    tmp = directory / f".{WEIGHTS_NAME}.tmp"
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, directory / WEIGHTS_NAME)
    architecture = "XLMRobertaForMaskedLM" if include_mlm_head else "XLMRobertaModel"
    encoder.config.save(directory, architecture=architecture)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


# config.json key of an exported infoxlm model: the hidden_states index XLCO contrasted (the
# universal layer). transformers keeps unknown keys as attributes, so the file still loads there.
CONTRAST_LAYER_KEY = "infoxlm_contrast_layer"
# false: the run's recipe named that layer but trained without XLCO (an ablation): the layer is
# kept, so that the ablation is read where the full method is, and said for what it is.
CONTRASTED_KEY = "infoxlm_contrast_trained"
UNCONTRASTED_LAYER = "the universal layer of its recipe, which trained without XLCO"


def record_contrast_layer(directory: str | Path, layer: int, contrasted: bool = True) -> None:
    """Add ``CONTRAST_LAYER_KEY`` (and, for a run without XLCO, ``CONTRASTED_KEY``) to the
    ``config.json`` of ``directory``."""
    path = Path(directory) / "config.json"
    fields = read_json(path, what="a config.json", max_bytes=CONFIG_BYTES, error=CheckpointError)
    fields[CONTRAST_LAYER_KEY] = int(layer)
    if not contrasted:
        fields[CONTRASTED_KEY] = False
    path.write_text(json.dumps(fields, indent=2, sort_keys=True) + "\n")


def read_contrast_layer(directory: str | Path) -> int | None:
    """The contrast layer recorded in ``config.json`` by ``infoxlm export``, or None."""
    value = _config_fields(directory).get(CONTRAST_LAYER_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def recorded_layer_rule(directory: str | Path) -> str:
    """How a command names the recorded layer: the contrast layer, or for a model trained
    without XLCO, its recipe's universal layer (``UNCONTRASTED_LAYER``)."""
    return UNCONTRASTED_LAYER if _config_fields(directory).get(CONTRASTED_KEY) is False else RECORDED_CONTRAST_LAYER


def _config_fields(directory: str | Path) -> dict:
    try:
        fields = read_json(Path(directory) / "config.json", what="a config.json", max_bytes=CONFIG_BYTES)
    except InfoXLMError:  # the model's own config check names the file
        return {}
    return fields if isinstance(fields, dict) else {}
