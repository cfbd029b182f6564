"""LayerNorm whose output keeps autocast's low-precision dtype.

Autocast runs ``layer_norm`` in fp32 and returns fp32. In a post-LayerNorm encoder every
layer's output *is* a LayerNorm output, so under plain autocast the whole residual stream
stays fp32: each of the query, key, value and feed-forward projections that read it first
casts it to bf16 (a separate read of 4 and write of 2 bytes per element), the residual sums
read fp32, and the backward pass mirrors every one of those casts. Here, under autocast,
a bf16 input is normalised by the bf16 kernel (which accumulates its mean and variance in
fp32) and an fp32 input (the embedding sum) is normalised in fp32; either way the output is
bf16, the dtype its readers multiply in anyway. Outside autocast it is ``nn.LayerNorm``.
Parameters and state-dict keys are ``nn.LayerNorm``'s, so checkpoints do not change.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .autocast import autocast_dtype


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` that, under autocast, returns the autocast dtype (see the module docstring).

    ``keep_autocast_dtype=False`` gives autocast's own behaviour (fp32 out); an encoder passes
    its ``FastPaths.low_precision_residual``.
    """

    def __init__(self, *args, keep_autocast_dtype: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_autocast_dtype = keep_autocast_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        dtype = autocast_dtype(device)
        if not self.keep_autocast_dtype or dtype is None:
            return super().forward(x)
        with torch.autocast(device, enabled=False):
            if x.dtype == dtype:
                weight, bias = self.weight.to(dtype), self.bias.to(dtype)  # d values each: negligible
                return F.layer_norm(x, self.normalized_shape, weight, bias, self.eps)
            return F.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps).to(dtype)
