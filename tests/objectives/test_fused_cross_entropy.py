"""The Triton cross-entropy kernels, run on the CPU through Triton's interpreter.

On a GPU, tests/gpu checks them compiled; here ``TRITON_INTERPRET=1`` executes the same
kernel code with NumPy, so their arithmetic (online log-sum-exp, −inf columns, per-token
gradient weights, strided rows, empty input) is checked wherever Triton is installed (the
test extra installs it on Linux x86-64). The interpreter must be chosen before Triton is
imported, hence a child process.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")

CHECK = textwrap.dedent(
    """
    import torch, torch.nn.functional as F
    from infoxlm.objectives.fused_cross_entropy import fused_token_cross_entropy

    torch.manual_seed(0)
    # (rows, columns, dtype, row stride padding): V below, at and above the block; bf16 and
    # fp32; the last 7 columns −inf as in the padded vocabulary; one strided view of rows.
    for n, V, dtype, extra in ((5, 1000, torch.float32, 0), (3, 5000, torch.bfloat16, 0), (4, 4096, torch.float32, 3)):
        storage = (3 * torch.randn(n, V + extra)).to(dtype)
        storage[:, V - 7 : V] = float("-inf")
        logits = storage[:, :V]  # rows V + extra apart when extra > 0
        targets = torch.randint(0, V - 7, (n,))
        weights = torch.rand(n)
        x = logits.detach().requires_grad_()
        loss = fused_token_cross_entropy(x, targets)
        (grad,) = torch.autograd.grad((loss * weights).sum(), x)
        exact = logits.detach().double().requires_grad_()
        reference = F.cross_entropy(exact, targets, reduction="none")
        (exact_grad,) = torch.autograd.grad((reference * weights).sum(), exact)
        assert loss.dtype == torch.float32 and grad.dtype == dtype and grad.shape == (n, V)
        assert (loss.double() - reference.detach()).abs().max() < 1e-5, (n, V, dtype)
        tolerance = 2e-3 if dtype == torch.bfloat16 else 1e-6
        assert (grad.double() - exact_grad).abs().max() < tolerance, (n, V, dtype)
        assert grad[:, V - 7 :].eq(0).all()  # the −inf columns: probability 0, gradient 0
    assert fused_token_cross_entropy(torch.zeros(0, 10), torch.zeros(0, dtype=torch.long)).shape == (0,)
    print("ok")
    """
)


@pytest.mark.slow
def test_kernels_compute_cross_entropy_and_its_gradient():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
