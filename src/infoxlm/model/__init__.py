"""The XLM-R-compatible encoder, its masked-LM head and Hugging Face checkpoint I/O."""

from .config import EncoderConfig
from .encoder import Encoder, EncoderOutput
from .fast_paths import FastPaths
from .mlm_head import MLMHead

__all__ = ["Encoder", "EncoderConfig", "EncoderOutput", "FastPaths", "MLMHead"]
