"""infoxlm: cross-lingual language-model pre-training on an XLM-R-compatible encoder.

The public API::

    Encoder.from_pretrained(path)   an XLM-R encoder + tied MLM head from a Hugging Face directory
    Encoder.save_pretrained(path)   … and back, loadable by transformers as XLM-R
    EncoderConfig                   XLM-R's config.json fields; named sizes tiny / small / base / large
    Tokenizer.from_pretrained(path) XLM-R ids from tokenizer.json or sentencepiece.bpe.model
    train_tokenizer(...)            a new vocabulary, languages sampled by p ∝ (n_l / n)^α
    embed(model_path, sentences)    pooled sentence embeddings from any layer

These names are imported at first use (PEP 562's module ``__getattr__``): ``import infoxlm``
itself loads no torch, so ``infoxlm --version`` and every ``--help`` answer at once.
"""

from __future__ import annotations

from .lazy_exports import lazy_exports
from .version import __version__

from . import interrupt

if interrupt.started_as_command():  # before any heavy import (see interrupt.py)
    interrupt.install()

from .errors import CheckpointError, InfoXLMError, TokenizerError  # noqa: E402

# Public name → the module that defines it (imported when the name is first read).
_LAZY = {
    "Encoder": ".model",
    "EncoderConfig": ".model",
    "EncoderOutput": ".model",
    "MLMHead": ".model",
    "Tokenizer": ".tokenizer",
    "embed": ".embedding",
    "embed_layers": ".embedding",
    "train_tokenizer": ".tokenizer_training",
}

__all__ = [
    "CheckpointError",
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "InfoXLMError",
    "MLMHead",
    "Tokenizer",
    "TokenizerError",
    "embed",
    "embed_layers",
    "train_tokenizer",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
