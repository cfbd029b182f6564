"""On a GPU: the fast path (bf16 autocast with a bf16 residual stream, real tokens only with
variable-length attention, masked-only head with the vocabulary padded to a multiple of 64, fused
vocabulary cross-entropy, cuDNN-free attention, in-place word-embedding gradient, top layers on the
rows read only) computes the plain path's losses and gradients (fp32, padded, plain cross-entropy,
whole top layers) within bf16 tolerance. Skipped without CUDA;
run on a GPU machine with ``pytest tests/gpu``."""

import pytest
import torch


from infoxlm.model.fast_paths import FastPaths
from infoxlm.objectives.masked_lm import MaskedLM

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def _demo_micro_step(non_blocking: bool = False):
    """The demo size's encoder (dropout 0) and contrast on the GPU, and one micro-step's
    MMLM, TLM and XLCO batches there: (encoder, contrast, [mmlm, tlm, xlco])."""
    from infoxlm.bench.step_benchmark import train_config
    from infoxlm.bench.sizes import SIZES
    from infoxlm.data.synthetic_batches import SyntheticSpec, synthetic_step
    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.encoder import Encoder
    from infoxlm.objectives.registry import contrast_objective

    size, device = SIZES["demo"], torch.device("cuda")
    config = train_config(size, device, bf16=True)
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig.of_size(size.encoder, vocab_size=size.vocab_size))
    encoder.set_dropout(0.0)
    contrast = contrast_objective(encoder, config.contrast)
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length, 16, 16, 32, 8192)
    data = synthetic_step(spec, 0)
    batches = [b.to(device, non_blocking=non_blocking) for b in (data.mmlm[0], data.tlm[0], data.xlco[0])]
    return encoder.to(device), contrast.to(device), batches


def test_fused_cross_entropy_matches_plain_fp32():
    from infoxlm.objectives.vocab_loss import fused_kernels_run_on, plain_token_cross_entropy, token_cross_entropy

    # fused=True takes the fused kernels here (their trial run worked), not the fallback.
    assert fused_kernels_run_on(torch.zeros(1, device="cuda", dtype=torch.bfloat16))

    torch.manual_seed(0)
    # Row counts and a V that is no multiple of the kernels' block; bf16 (the trainer's) and
    # fp32 logits; per-token loss weights, which reach the gradient.
    for n, dtype in ((1000, torch.bfloat16), (1337, torch.bfloat16), (257, torch.float32)):
        logits = (3 * torch.randn(n, 50_000, device="cuda")).to(dtype)
        targets = torch.randint(0, 50_000, (n,), device="cuda")
        weights = torch.rand(n, device="cuda")
        reference = logits.double().requires_grad_()
        plain = plain_token_cross_entropy(reference, targets)
        (g_plain,) = torch.autograd.grad((plain * weights).sum(), reference)
        fed = logits.requires_grad_()
        fused = token_cross_entropy(fed, targets, fused=True)
        (g_fused,) = torch.autograd.grad((fused * weights).sum(), fed)
        assert fused.dtype == torch.float32 and g_fused.dtype == dtype
        assert _relative(fused.detach(), plain.detach()) < 1e-5, (n, dtype)
        assert _relative(g_fused, g_plain) < (1e-2 if dtype == torch.bfloat16 else 1e-5), (n, dtype)
    empty = token_cross_entropy(torch.zeros(0, 10, device="cuda"), torch.zeros(0, dtype=torch.long, device="cuda"), fused=True)
    assert empty.shape == (0,)


def test_fused_cross_entropy_over_a_padded_vocabulary():
    """The head's padded product (−inf columns beyond V) through the fused kernels gives the
    unpadded loss and gradients, computed plainly in float64."""
    from infoxlm.model.mlm_head import padded_vocab_logits
    from infoxlm.objectives.vocab_loss import plain_token_cross_entropy, token_cross_entropy

    torch.manual_seed(0)
    n, d, vocab = 777, 64, 50_001  # 50,001 → 50,048 columns
    x = torch.randn(n, d, device="cuda", requires_grad=True)
    weight = (0.2 * torch.randn(vocab, d, device="cuda")).requires_grad_()
    bias = torch.randn(vocab, device="cuda", requires_grad=True)
    targets = torch.randint(0, vocab, (n,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = padded_vocab_logits(x, weight, bias, 64)
        assert logits.shape == (n, 50_048) and logits.dtype == torch.bfloat16
        fused = token_cross_entropy(logits, targets, fused=True)
    fused_grads = torch.autograd.grad(fused.sum(), (x, weight, bias))
    exact = [t.detach().double().requires_grad_() for t in (x, weight, bias)]
    plain = plain_token_cross_entropy(torch.nn.functional.linear(*exact), targets)
    plain_grads = torch.autograd.grad(plain.sum(), exact)
    assert torch.isfinite(fused).all()
    assert _relative(fused, plain) < 1e-2
    for got, want in zip(fused_grads, plain_grads):
        assert got.shape == want.shape and _relative(got, want) < 3e-2


def test_joint_losses_and_gradients_match_the_plain_path():
    import infoxlm.train.joint_model as joint_model

    encoder, contrast, batches = _demo_micro_step()

    def run(fast: bool):
        # The fast path as the trainer runs it in one process: word-embedding gradient in place.
        paths = FastPaths.training(single_process=True) if fast else FastPaths.plain()
        model = joint_model.JointModel(encoder.with_fast_paths(paths), [MaskedLM("mmlm"), MaskedLM("tlm"), contrast])
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=fast):
            out = {name: term.loss_sum for name, term in model(dict(zip(("mmlm", "tlm", "xlco"), batches))).items()}
        losses = torch.stack([out["mmlm"], out["tlm"], out["xlco"]]).float()
        losses.sum().backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        return losses.detach(), grads

    fast_losses, fast_grads = run(fast=True)
    plain_losses, plain_grads = run(fast=False)

    assert set(fast_grads) == set(plain_grads)
    # A key bias adds q·b to every score of a query's row, which softmax ignores: its true
    # gradient is 0, so both paths give rounding noise there; it must stay noise-sized.
    total = torch.cat([g.flatten() for g in plain_grads.values()]).norm()
    zero_by_design = [n for n in plain_grads if n.endswith("attention.self.key.bias")]
    for name in zero_by_design:
        assert fast_grads[name].norm() < 1e-3 * total and plain_grads.pop(name).norm() < 1e-5 * total, (name, total)
    errors = {n: _relative(fast_grads[n], plain_grads[n]) for n in plain_grads}
    every = _relative(torch.cat([fast_grads[n].flatten() for n in errors]), torch.cat([plain_grads[n].flatten() for n in errors]))
    worst = sorted(errors.items(), key=lambda kv: -kv[1])[:5]
    print(f"losses fast {fast_losses.tolist()} plain {plain_losses.tolist()}; all gradients {every:.2e}; worst {worst}")
    assert _relative(fast_losses, plain_losses) < 1e-2, (fast_losses, plain_losses)
    # bf16 keeps 8 bits of mantissa (≈ 0.4 % per rounding): a few percent over a 4-layer
    # backward, more for tensors whose true gradient is nearly zero.
    assert every < 3e-2, worst
    assert worst[0][1] < 0.25, worst


def test_packed_varlen_attention_matches_padded_sdpa():
    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.attention import HAS_VARLEN_ATTN, varlen_attention_applies
    from infoxlm.model.encoder import Encoder

    assert HAS_VARLEN_ATTN, f"torch {torch.__version__} has no torch.nn.attention.varlen"
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig.of_size("tiny", vocab_size=1000)).cuda()
    encoder.set_dropout(0.0)
    lengths = [37, 5, 64, 20]
    ids = torch.ones(len(lengths), max(lengths), dtype=torch.long, device="cuda")
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, 1000, (n,), device="cuda")
    mask = ids.ne(1)
    weights = torch.randn(*ids.shape, 64, device="cuda")

    def run(varlen: bool):
        model = encoder.with_fast_paths(FastPaths(skip_padding=True, varlen_attention=varlen))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert varlen_attention_applies(torch.zeros(1, device="cuda"), 0.0)
            hidden = model(ids, mask).last_hidden_state.float()  # (B, T, d)
        (hidden[mask] * weights[mask]).sum().backward()
        return hidden[mask].detach(), model.encoder.layer[0].attention.self.query.weight.grad.clone()

    (h_varlen, g_varlen), (h_padded, g_padded) = run(True), run(False)
    assert _relative(h_varlen, h_padded) < 1e-2
    assert _relative(g_varlen, g_padded) < 3e-2


def test_cudnn_attention_on_an_unpadded_pass_matches_flash():
    """MMLM's passes have no padding: with ``cudnn_attention`` they run cuDNN's SDPA kernel,
    and the states and gradients equal flash attention's within bf16 rounding."""
    from torch.profiler import ProfilerActivity, profile

    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.encoder import Encoder

    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig.of_size("tiny", vocab_size=1000)).cuda()
    encoder.set_dropout(0.0)
    ids = torch.randint(4, 1000, (4, 128), device="cuda")  # (B, T), no padding
    weights = torch.randn(4, 128, 64, device="cuda")

    def run(cudnn: bool):
        model = encoder.with_fast_paths(FastPaths(skip_padding=True, cudnn_attention=cudnn))
        model.zero_grad(set_to_none=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.autocast("cuda", dtype=torch.bfloat16):
            hidden = model(ids).last_hidden_state.float()  # (B, T, d)
            (hidden * weights).sum().backward()
            torch.cuda.synchronize()
        kernels = " ".join(e.name.lower().replace(" ", "_") for e in prof.events())
        return hidden.detach(), model.encoder.layer[0].attention.self.query.weight.grad.clone(), kernels

    (h_cudnn, g_cudnn, k_cudnn), (h_flash, g_flash, k_flash) = run(True), run(False)
    # cuDNN's own kernels carry its name (and may say "flash" too): the check is on "cudnn".
    attention = sorted({k for k in k_cudnn.split() if "cudnn" in k or "flash" in k or "fmha" in k})
    assert any("cudnn" in k for k in attention), f"cuDNN's attention did not run; attention kernels: {attention}"
    assert "cudnn" not in k_flash, "the flash run used cuDNN"
    assert _relative(h_cudnn, h_flash) < 1e-2, _relative(h_cudnn, h_flash)
    assert _relative(g_cudnn, g_flash) < 3e-2, _relative(g_cudnn, g_flash)


def test_a_micro_step_never_waits_on_the_device():
    """Forward and backward of a joint micro-step, on batches that carry their host-made
    packings, queue their kernels without reading anything back from the device: with
    torch's sync debug mode set to "error", any synchronising call raises."""
    from infoxlm.train.joint_model import JointModel

    encoder, contrast, batches = _demo_micro_step(non_blocking=True)
    model = JointModel(encoder.with_fast_paths(FastPaths.training(single_process=True)), [MaskedLM("mmlm"), MaskedLM("tlm"), contrast])
    assert all(b.num_padding > 0 for b in batches[1:])  # the packed paths run

    def micro_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = {name: term.loss_sum for name, term in model(dict(zip(("mmlm", "tlm", "xlco"), batches))).items()}
        (out["mmlm"] + out["tlm"] + out["xlco"]).backward()

    micro_step()  # compiles the fused cross-entropy (its trial run may synchronise)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        micro_step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert all(p.grad is not None for p in model.encoder.encoder.layer[0].parameters())
