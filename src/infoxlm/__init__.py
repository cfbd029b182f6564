"""infoxlm: cross-lingual language-model pre-training on an XLM-R-compatible encoder.

The public API::

    Encoder.from_pretrained(path)   an XLM-R encoder + tied MLM head from a Hugging Face directory
    Encoder.save_pretrained(path)   … and back, loadable by transformers as XLM-R
    EncoderConfig                   XLM-R's config.json fields; named sizes tiny / small / base / large
    Tokenizer.from_pretrained(path) XLM-R ids from tokenizer.json or sentencepiece.bpe.model
    train_tokenizer(...)            a new vocabulary, languages sampled by p ∝ (n_l / n)^α
    embed(model_path, sentences)    pooled sentence embeddings from any layer
"""

from .version import __version__

from . import interrupt

if interrupt.started_as_command():  # before the heavy imports below (see interrupt.py)
    interrupt.install()

from .embedding import embed, embed_layers  # noqa: E402
from .errors import CheckpointError, InfoXLMError, TokenizerError  # noqa: E402
from .model import Encoder, EncoderConfig, EncoderOutput, MLMHead  # noqa: E402
from .tokenizer import Tokenizer  # noqa: E402
from .tokenizer_training import train_tokenizer  # noqa: E402

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
