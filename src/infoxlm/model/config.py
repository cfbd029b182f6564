"""The encoder's shape, spelled with the field names of XLM-R's ``config.json``.

``EncoderConfig`` is read from and written to a Hugging Face XLM-R ``config.json`` unchanged,
so a directory written by infoxlm is a directory ``transformers`` reads as XLM-R, and the other
way round. Named sizes cover the range the project uses::

    >>> EncoderConfig.of_size("base").num_hidden_layers
    12
    >>> EncoderConfig.of_size("tiny", vocab_size=1000).hidden_size
    64
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..version import __version__
from ..errors import CheckpointError
from ..json_files import CONFIG_BYTES, read_json

# model_type values whose checkpoints have exactly this architecture.
SUPPORTED_MODEL_TYPES = ("xlm-roberta",)
# config.json field naming the infoxlm version that wrote the directory.
WRITER_KEY = "infoxlm_version"


@dataclass
class EncoderConfig:
    """Hyperparameters of an XLM-R (post-LayerNorm RoBERTa) encoder."""

    vocab_size: int = 250_002
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    # XLM-R positions start at pad_token_id + 1 = 2, so 514 rows hold 512 tokens.
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field before anything is allocated; a ``ValueError`` names the field, the
        value (as JSON writes it) and what is allowed."""
        for name in _SIZES:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} is {_json(value)}: expected a positive integer")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value < self.vocab_size:
                raise ValueError(f"{name} is {_json(value)}: expected an id in 0 … {self.vocab_size - 1} (vocab_size - 1)")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value < 1:
                raise ValueError(f"{name} is {_json(value)}: expected a number in [0, 1)")
        if not _is_number(self.layer_norm_eps) or not 0 < self.layer_norm_eps < math.inf:
            raise ValueError(f"layer_norm_eps is {_json(self.layer_norm_eps)}: expected a positive number")
        if not _is_number(self.initializer_range) or not 0 <= self.initializer_range < math.inf:
            raise ValueError(f"initializer_range is {_json(self.initializer_range)}: expected a number >= 0")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size is {self.hidden_size}: expected a multiple of num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if self.hidden_act not in ("gelu",):
            raise ValueError(f"hidden_act is {_json(self.hidden_act)}: only XLM-R's \"gelu\" is supported")
        if self.max_position_embeddings <= self.pad_token_id + 1:
            raise ValueError(
                f"max_position_embeddings is {self.max_position_embeddings}: expected more than "
                f"pad_token_id + 1 = {self.pad_token_id + 1}, where positions start"
            )
        # Sizes are bounded before anything is allocated: first the whole model, named by the
        # field furthest beyond XLM-R XXL's, then each size on its own.
        n = self.num_parameters
        if n > MAX_PARAMETERS:
            name = max(_XXL, key=lambda f: getattr(self, f) / _XXL[f])
            raise ValueError(
                f"{name} is {getattr(self, name)}: the encoder would have {n:.3g} parameters "
                f"({4 * n / 1e9:.3g} GB in fp32); infoxlm accepts at most {MAX_PARAMETERS:.0e} "
                f"(XLM-R XXL, the largest XLM-R, has 1.07e+10)"
            )
        for name, bound in _SIZES.items():
            if getattr(self, name) > bound:
                raise ValueError(
                    f"{name} is {getattr(self, name)}: expected at most {bound:,} (a sanity bound; "
                    f"XLM-R XXL has {_XXL.get(name, 1):,})"
                )

    @property
    def num_parameters(self) -> int:
        """Parameters of the encoder with its MLM head (tied decoder counted once) and pooler."""
        h, i, L, V = self.hidden_size, self.intermediate_size, self.num_hidden_layers, self.vocab_size
        embeddings = (V + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h  # attention, feed-forward, 2 LayerNorms
        head = h * h + 3 * h + V  # dense, LayerNorm, bias
        return embeddings + L * layer + head + h * h + h

    @property
    def max_sequence_length(self) -> int:
        """Longest input the position table holds (512 for XLM-R)."""
        return self.max_position_embeddings - self.pad_token_id - 1

    @classmethod
    def of_size(cls, name: str, **overrides: Any) -> "EncoderConfig":
        """A named size: ``tiny`` (tests), ``small`` (CPU demos), ``base`` (12×768), ``large``
        (24×1024), ``xl`` (36×2560, 3.5B parameters with XLM-R's vocabulary), ``xxl`` (48×4096, 10.7B)."""
        if name not in _NAMED_SIZES:
            raise ValueError(f"unknown encoder size {name!r}; expected one of {sorted(_NAMED_SIZES)}")
        return cls(**{**_NAMED_SIZES[name], **overrides})

    # --- Hugging Face config.json -------------------------------------------------------

    def to_hf_dict(self, architecture: str = "XLMRobertaForMaskedLM") -> dict[str, Any]:
        """The fields of a Hugging Face ``XLMRobertaConfig`` for this encoder."""
        return {
            "architectures": [architecture],
            "model_type": "xlm-roberta",
            **dataclasses.asdict(self),
            "position_embedding_type": "absolute",
            "tie_word_embeddings": True,
            # Marks the directory as written by infoxlm (a later export may replace it).
            WRITER_KEY: __version__,
        }

    @classmethod
    def from_hf_dict(cls, fields: dict[str, Any], source: str = "config.json") -> "EncoderConfig":
        """Read an XLM-R ``config.json`` dict; unknown fields (dtype, id2label, …) are ignored."""
        model_type = fields.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise CheckpointError(
                f"{source}: model_type is {model_type!r}; expected one of "
                f"{list(SUPPORTED_MODEL_TYPES)} (an XLM-R-style checkpoint)"
            )
        if fields.get("position_embedding_type", "absolute") != "absolute":
            raise CheckpointError(
                f"{source}: position_embedding_type is {fields['position_embedding_type']!r}; "
                "expected 'absolute' as in XLM-R"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in fields.items() if k in known})
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{source}: {err}") from None

    def save(self, directory: str | Path, architecture: str = "XLMRobertaForMaskedLM") -> Path:
        path = Path(directory) / "config.json"
        path.write_text(json.dumps(self.to_hf_dict(architecture), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> "EncoderConfig":
        path = Path(directory) / "config.json"
        if not os.path.lexists(path):  # what is there but no regular file is named by read_json
            raise CheckpointError(f"{directory}: no config.json; expected a Hugging Face XLM-R checkpoint directory")
        fields = read_json(path, what="a Hugging Face config.json", max_bytes=CONFIG_BYTES, error=CheckpointError)
        if not isinstance(fields, dict):
            raise CheckpointError(f"{path}: expected a JSON object, found {type(fields).__name__}")
        return cls.from_hf_dict(fields, source=str(path))


# Positive integer fields and a sanity bound on each (far above any XLM-R), and the whole
# encoder's parameters: 2e10 is 80 GB in fp32, about twice XLM-R XXL.
_SIZES = {
    "vocab_size": 16_777_216,
    "hidden_size": 65_536,
    "num_hidden_layers": 1_024,
    "num_attention_heads": 1_024,
    "intermediate_size": 262_144,
    "max_position_embeddings": 1_048_576,
    "type_vocab_size": 1_024,
}
MAX_PARAMETERS = 2 * 10**10
_XXL = {"vocab_size": 250_002, "hidden_size": 4_096, "num_hidden_layers": 48, "num_attention_heads": 32,
        "intermediate_size": 16_384, "max_position_embeddings": 514, "type_vocab_size": 1}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _json(value: Any) -> str:
    """A value as config.json spells it: true, null, "12"."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


_NAMED_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    # The shapes of XLM-R XL and XXL (Goyal et al., 2021); their vocabulary is 250,880 pieces.
    "xl": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, intermediate_size=10240),
    "xxl": dict(hidden_size=4096, num_hidden_layers=48, num_attention_heads=32, intermediate_size=16384),
}
ENCODER_SIZES = tuple(_NAMED_SIZES)  # the named sizes, smallest first (train's model.size)
