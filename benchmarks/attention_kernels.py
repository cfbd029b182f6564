"""Attention kernels on one pass's shape: forward + backward time of each SDPA backend and of
``varlen_attn`` over the same tokens packed, on a GPU (the choice behind
``FastPaths.cudnn_attention``).

    python benchmarks/attention_kernels.py                       # base's MMLM micro-batch
    python benchmarks/attention_kernels.py --batch 64 --length 512 --heads 16 --head-dim 64
"""

from __future__ import annotations

import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from torch.utils.benchmark import Timer

from infoxlm.model.attention import HAS_VARLEN_ATTN

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=192, help="sequences (default: 192, 98,304 tokens of 512)")
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    args = parser.parse_args(argv)
    B, T, h, dh = args.batch, args.length, args.heads, args.head_dim
    q, k, v = (torch.randn(B, h, T, dh, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, h, T, dh, device="cuda", dtype=torch.bfloat16)
    flops = 4 * B * h * T * T * dh * 3.5  # forward 1, backward 2.5 (the recomputed scores)

    def sdpa(backend):
        def step():
            with sdpa_kernel([backend]):
                scaled_dot_product_attention(q, k, v).backward(grad)
        return step

    def varlen():
        from torch.nn.attention.varlen import varlen_attn

        cu = torch.arange(0, (B + 1) * T, T, device="cuda", dtype=torch.int32)
        packed = [x.detach().transpose(1, 2).reshape(B * T, h, dh).requires_grad_() for x in (q, k, v)]
        g = grad.transpose(1, 2).reshape(B * T, h, dh)

        def step():
            varlen_attn(*packed, cu, cu, T, T).backward(g)
        return step

    candidates = {name: sdpa(backend) for name, backend in BACKENDS.items()}
    if HAS_VARLEN_ATTN:  # torch ≥ 2.9
        candidates["varlen"] = varlen()
    print(f"attention forward + backward, (B, h, T, d/h) = ({B}, {h}, {T}, {dh}), bf16")
    for name, step in candidates.items():
        try:
            step()
            torch.cuda.synchronize()
            seconds = Timer("step(); torch.cuda.synchronize()", globals={"step": step, "torch": torch}).blocked_autorange(min_run_time=1.0).median
        except RuntimeError as error:
            print(f"  {name:<10} unavailable: {str(error).splitlines()[0][:100]}")
            continue
        print(f"  {name:<10} {seconds * 1e3:8.2f} ms  {flops / seconds / 1e12:6.0f} TFLOP/s")


if __name__ == "__main__":
    main()
