"""LayerNorm keeps autocast's dtype on its output, and is nn.LayerNorm everywhere else."""

from __future__ import annotations

import torch
from torch import nn

from infoxlm.model.layer_norm import LayerNorm


def _pair(d: int = 16, keep_autocast_dtype: bool = True) -> tuple[LayerNorm, nn.LayerNorm]:
    torch.manual_seed(0)
    ours, plain = LayerNorm(d, eps=1e-5, keep_autocast_dtype=keep_autocast_dtype), nn.LayerNorm(d, eps=1e-5)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        ours.bias.normal_()
    plain.load_state_dict(ours.state_dict())  # the same keys: checkpoints do not change
    return ours, plain


def test_outside_autocast_it_is_nn_layer_norm():
    ours, plain = _pair()
    x = 3 * torch.randn(5, 16) + 1
    assert torch.equal(ours(x), plain(x))


def test_under_autocast_the_output_keeps_the_autocast_dtype():
    ours, plain = _pair()
    x32 = 3 * torch.randn(64, 16) + 1
    exact = plain(x32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        from_fp32 = ours(x32)  # the embedding sum: normalised in fp32, handed on in bf16
        from_bf16 = ours(x32.to(torch.bfloat16))  # a residual sum in bf16
        autocast_own = plain(x32)
    assert from_fp32.dtype == from_bf16.dtype == torch.bfloat16
    assert autocast_own.dtype == torch.float32  # what plain autocast hands on (on a GPU for bf16 input too)
    assert torch.equal(from_fp32, exact.to(torch.bfloat16))
    # bf16 input and output: within a few bf16 roundings (≈ 0.4 % each) of the fp32 result.
    assert (from_bf16.float() - exact).abs().max() < 0.05 * exact.abs().max()


def test_switched_off_it_follows_autocast_and_gradients_stay_fp32():
    switched_off, plain = _pair(keep_autocast_dtype=False)
    x = torch.randn(8, 16, dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert switched_off(x.float()).dtype == torch.float32
        assert torch.equal(switched_off(x), plain(x))
    ours, _ = _pair()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = ours(x)
    y.float().square().sum().backward()
    assert ours.weight.grad.dtype == ours.bias.grad.dtype == torch.float32
    assert x.grad.dtype == torch.bfloat16 and x.grad.abs().sum() > 0
