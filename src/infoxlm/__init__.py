"""infoxlm: cross-lingual language-model pre-training on an XLM-R-compatible encoder.

The public API::

    Encoder.from_pretrained(path)   an XLM-R encoder + tied MLM head from a Hugging Face directory
    Encoder.save_pretrained(path)   … and back, loadable by transformers as XLM-R
    EncoderConfig                   XLM-R's config.json fields; named sizes tiny / small / base / large
    Tokenizer.from_pretrained(path) XLM-R ids from tokenizer.json or sentencepiece.bpe.model
    Tokenizer.train(...)            a new vocabulary, languages sampled by p ∝ (n_l / n)^α
    embed(model_path, sentences)    pooled sentence embeddings from any layer
"""

from .version import __version__

from .embedding import embed, embed_layers
from .errors import CheckpointError, InfoXLMError, TokenizerError
from .model import Encoder, EncoderConfig, EncoderOutput, MLMHead
from .tokenizer import Tokenizer

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
]
