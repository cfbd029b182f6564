"""XLM-R's masked-LM head, computing vocabulary logits only where they are needed.

With XLM-R's 250,002-piece vocabulary the output projection costs more than the whole encoder
per predicted token, so the head selects the masked positions *before* the projection:
logits (N, V) for the N masked tokens instead of (B, T, V) for every position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import EncoderConfig


class MLMHead(nn.Module):
    """dense → GELU → LayerNorm → (tied word embeddings)ᵀ + bias.

    Parameter names match Hugging Face's ``lm_head.*``; ``decoder.weight`` *is* the word
    embedding matrix (tied, never stored twice).
    """

    def __init__(self, config: EncoderConfig, word_embeddings: nn.Embedding):
        super().__init__()
        d = config.hidden_size
        self.dense = nn.Linear(d, d)
        self.layer_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(d, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied, as in XLM-R
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, masked_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Vocabulary logits.

        hidden_states (B, T, d); masked_positions (B, T) bool → logits (N, V) for the N True
        positions, in row-major order (the order of ``labels[masked_positions]``). Without
        masked_positions: logits (B, T, V) everywhere.
        """
        if masked_positions is not None:
            hidden_states = hidden_states[masked_positions]  # (N, d)
        x = self.layer_norm(F.gelu(self.dense(hidden_states)))
        return F.linear(x, self.decoder.weight, self.bias)
