"""Self-attention over the padded layout (SDPA with a mask) and over packed real tokens
(flash attention's variable-length kernel, CUDA only) compute the same thing."""

from __future__ import annotations

import pytest
import torch

from infoxlm import Encoder, EncoderConfig
from infoxlm.model import attention
from infoxlm.model.fast_paths import FastPaths

TOL = 1e-5


def test_packed_attention_matches_the_padded_layout(mixed_batch, monkeypatch):
    """The variable-length path (CUDA only) is plumbed right: with a reference kernel in its
    place, packed real tokens give what the padded layout with a mask gives."""

    def reference_varlen(q, k, v, cu_q, cu_k, max_q, max_k):  # (n, h, d/h) each, one sequence at a time
        assert cu_q is cu_k and max_q == max_k and cu_q.dtype == torch.int32
        assert int((cu_q[1:] - cu_q[:-1]).max()) <= max_q
        out = torch.empty_like(q)
        for start, end in zip(cu_q[:-1].tolist(), cu_q[1:].tolist()):
            seq = [t[start:end].transpose(0, 1) for t in (q, k, v)]  # (h, length, d/h)
            out[start:end] = torch.nn.functional.scaled_dot_product_attention(*seq).transpose(0, 1)
        return out

    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    enc.set_dropout(0.0)  # training mode (gradients below), the same outputs every run
    ids, mask = mixed_batch
    enc = enc.with_fast_paths(FastPaths(skip_padding=True))
    padded = enc(ids, mask).hidden_states
    monkeypatch.setattr(attention, "varlen_attn", reference_varlen)
    monkeypatch.setattr(attention, "varlen_attention_applies", lambda x, p: True)
    packed = enc(ids, mask).hidden_states
    real = mask.bool()
    for k, (a, b) in enumerate(zip(padded, packed)):
        assert (a - b)[real].abs().max() <= TOL, f"hidden_states[{k}]"
    # Gradients too: the packed path trains the projections as the padded one does.
    weights = torch.randn(padded[-1].shape)
    query = enc.encoder.layer[0].attention.self.query.weight
    grads = [torch.autograd.grad((h[real] * weights[real]).sum(), query)[0] for h in (padded[-1], packed[-1])]
    assert grads[1].abs().sum() > 0 and (grads[0] - grads[1]).abs().max() <= TOL
    plain = enc.with_fast_paths(FastPaths(skip_padding=True, varlen_attention=False))  # the padded layout again
    assert torch.equal(plain(ids, mask).hidden_states[-1], padded[-1])


def test_the_varlen_kernel_imported_at_its_call_compiles_into_one_graph():
    """The import inside ``varlen_attn`` is traced away: compiled layers call the kernel's op
    in their graph, no graph break (the kernel itself is never run: CPU)."""
    if not attention.HAS_VARLEN_ATTN:
        pytest.skip(f"torch {torch.__version__} has no torch.nn.attention.varlen")
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return lambda *args: (torch.zeros(1),)  # the CPU has no such kernel to run

    q = torch.randn(10, 2, 8, dtype=torch.bfloat16)  # (n, h, d/h)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    torch._dynamo.reset()
    torch.compile(attention.varlen_attn, backend=record, fullgraph=True)(q, q, q, cu, cu, 6, 6)
    assert len(graphs) == 1 and "_varlen_attn" in graphs[0].code


def test_varlen_attention_needs_a_gpu_low_precision_and_no_dropout():
    assert not attention.varlen_attention_applies(torch.zeros(4, 8, dtype=torch.bfloat16), 0.0)  # a CPU tensor
    if torch.cuda.is_available():
        x = torch.zeros(4, 8, device="cuda")
        assert not attention.varlen_attention_applies(x, 0.0)  # fp32, no autocast
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert not attention.varlen_attention_applies(x, 0.1)  # the kernel has no dropout


def test_set_dropout_reaches_the_attention_probabilities():
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    enc.set_dropout(0.3)
    assert [layer.attention.self.dropout_p for layer in enc.encoder.layer] == [0.3] * enc.num_layers


def test_under_cpu_bf16_autocast_attention_alone_runs_in_fp32(monkeypatch):
    """torch's CPU attention kernel is slower in bf16 than in fp32; the products around it
    still run in bf16, and without autocast nothing changes."""
    seen = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.dtype, torch.is_autocast_enabled("cpu")))
        return real_sdpa(q, k, v, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    torch.manual_seed(0)
    layer = attention.SelfAttention(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    x = torch.randn(2, 5, layer.query.in_features)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    plain = layer(x, mask)
    assert seen.pop() == (torch.float32, False) and plain.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = layer(x.bfloat16(), mask)
        assert torch.is_autocast_enabled("cpu")  # given back after the call
    assert seen.pop() == (torch.float32, False) and mixed.dtype == torch.bfloat16
    assert (mixed.float() - plain).abs().max() < 0.05


def test_cudnn_attention_asks_for_cudnn_only_on_passes_without_padding(mixed_batch, monkeypatch):
    """``cudnn_attention`` puts cuDNN's kernel first for passes without padding (MMLM's blocks)
    and leaves padded passes on flash / memory-efficient; a CPU has no cuDNN kernel, so its
    outputs are the path's without it."""
    asked = []
    real_sdpa_kernel = attention.sdpa_kernel

    def recording(backends):
        asked.append(list(backends))
        return real_sdpa_kernel(backends)

    monkeypatch.setattr(attention, "sdpa_kernel", recording)
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    enc.set_dropout(0.0)
    ids, mask = mixed_batch
    full = ids[:, :5].clamp_min(4)  # (B, 5), no padding
    without = enc.with_fast_paths(FastPaths(skip_padding=True))
    with_cudnn = enc.with_fast_paths(FastPaths(skip_padding=True, cudnn_attention=True))
    layers = enc.config.num_hidden_layers

    assert torch.equal(with_cudnn(full).last_hidden_state, without(full).last_hidden_state)
    assert asked[:layers] == [attention.UNPADDED_BACKENDS] * layers
    assert asked[layers:] == [attention.ATTENTION_BACKENDS] * layers
    asked.clear()
    with_cudnn(ids, mask)  # padded: never cuDNN
    assert asked == [attention.ATTENTION_BACKENDS] * layers
