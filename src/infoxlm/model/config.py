"""The encoder's shape, spelled with the field names of XLM-R's ``config.json``.

``EncoderConfig`` is read from and written to a Hugging Face XLM-R ``config.json`` unchanged,
so a directory written by infoxlm is a directory ``transformers`` reads as XLM-R, and the other
way round. Named sizes cover the range the project uses::

    >>> EncoderConfig.preset("base").num_hidden_layers
    12
    >>> EncoderConfig.preset("tiny", vocab_size=1000).hidden_size
    64
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CheckpointError

# model_type values whose checkpoints have exactly this architecture.
SUPPORTED_MODEL_TYPES = ("xlm-roberta",)


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
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.hidden_act not in ("gelu",):
            raise ValueError(f"hidden_act={self.hidden_act!r}: only XLM-R's 'gelu' is supported")
        if self.max_position_embeddings <= self.pad_token_id + 1:
            raise ValueError(
                f"max_position_embeddings={self.max_position_embeddings} leaves no room for "
                f"positions, which start at pad_token_id + 1 = {self.pad_token_id + 1}"
            )

    @property
    def max_sequence_length(self) -> int:
        """Longest input the position table holds (512 for XLM-R)."""
        return self.max_position_embeddings - self.pad_token_id - 1

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "EncoderConfig":
        """A named size: ``tiny`` (tests), ``small`` (CPU demos), ``base`` (12×768), ``large`` (24×1024)."""
        if name not in _PRESETS:
            raise ValueError(f"unknown encoder size {name!r}; expected one of {sorted(_PRESETS)}")
        return cls(**{**_PRESETS[name], **overrides})

    # --- Hugging Face config.json -------------------------------------------------------

    def to_hf_dict(self, architecture: str = "XLMRobertaForMaskedLM") -> dict[str, Any]:
        """The fields of a Hugging Face ``XLMRobertaConfig`` for this encoder."""
        return {
            "architectures": [architecture],
            "model_type": "xlm-roberta",
            **dataclasses.asdict(self),
            "position_embedding_type": "absolute",
            "tie_word_embeddings": True,
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
        if not path.is_file():
            raise CheckpointError(f"{directory}: no config.json; expected a Hugging Face XLM-R checkpoint directory")
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{path}: not valid JSON ({err})") from None
        if not isinstance(fields, dict):
            raise CheckpointError(f"{path}: expected a JSON object, found {type(fields).__name__}")
        return cls.from_hf_dict(fields, source=str(path))


_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
