import pytest

from infoxlm.train.flops import ModelShape, encoder_forward_flops, joint_step_flops, mfu, mlm_head_forward_flops, peak_bf16_flops

SHAPE = ModelShape(hidden_size=4, intermediate_size=8, num_layers=3, vocab_size=10)


def test_layer_params_are_the_six_matmuls():
    # Q, K, V, O: 4 · 4·4 = 64; FFN: 4·8 + 8·4 = 64
    assert SHAPE.layer_params == 128


def test_encoder_forward_by_hand():
    # one sequence of 5 tokens through 2 layers: weights 2·128·2·5 = 2560, attention 4·5·4·2·5 = 800
    assert encoder_forward_flops([5], SHAPE, 2) == 2560 + 800
    # sequences add up; attention grows with each sequence's own length (3² and 2², not 5²)
    assert encoder_forward_flops([3, 2], SHAPE, 1) == 2 * 128 * 5 + 4 * 4 * (9 + 4)


def test_head_counts_masked_tokens_only():
    assert mlm_head_forward_flops(3, SHAPE) == 3 * (2 * 16 + 2 * 4 * 10)


def test_top_layer_counts_only_the_outputs_read():
    # one sequence of 5 tokens, 2 layers, 2 top-layer outputs read: the lower layer as before
    # (2·128·5 + 4·5·4·5); the top: keys and values of all 5 (4·16·5), query, output
    # projection and feed-forward of the 2 (2·(2·16 + 2·4·8)·2), attention for 2 queries (4·2·4·5)
    lower = 2 * 128 * 5 + 4 * 5 * 4 * 5
    top = 4 * 16 * 5 + 2 * (2 * 16 + 2 * 4 * 8) * 2 + 4 * 2 * 4 * 5
    assert encoder_forward_flops([5], SHAPE, 2, outputs=[2]) == lower + top
    # every output read is the full count
    assert encoder_forward_flops([5, 3], SHAPE, 2, outputs=[5, 3]) == encoder_forward_flops([5, 3], SHAPE, 2)
    assert encoder_forward_flops([5], SHAPE, 0) == 0.0
    with pytest.raises(ValueError, match="at most its length"):
        encoder_forward_flops([5], SHAPE, 2, outputs=[6])


def test_joint_step_by_hand():
    f = joint_step_flops(
        SHAPE,
        mmlm_lengths=[6], mmlm_masked=[1],
        tlm_lengths=[4, 2], tlm_masked=[1, 1],
        xlco_query_lengths=[3], xlco_key_lengths=[5],
        contrast_layer=1, queue_size=7,
    )
    layer, d, ff = 128, 4, 8
    head = 2 * 16 + 2 * 4 * 10

    def top(T: int, m: int) -> int:  # the top layer of a sequence of T tokens, m outputs read
        return 4 * d * d * T + 2 * (2 * d * d + 2 * d * ff) * m + 4 * m * d * T

    mmlm_fwd = 2 * layer * 2 * 6 + 4 * 6 * 6 * 4 * 2 + top(6, 1) + head
    tlm_fwd = 2 * layer * 2 * 6 + 4 * 4 * 2 * (16 + 4) + top(4, 1) + top(2, 1) + 2 * head
    query_fwd = top(3, 1) + 2 * 16  # one layer read at <s> only, + projection
    logits = 2 * 4 * (1 + 7)
    key_fwd = top(5, 1) + 2 * 16
    assert f.mmlm == 3 * mmlm_fwd
    assert f.tlm == 3 * tlm_fwd
    assert f.xlco_query == 3 * query_fwd + 2 * logits
    assert f.xlco_key == key_fwd  # forward only: the key encoder gets no gradient
    assert f.total == f.mmlm + f.tlm + f.xlco_query + f.xlco_key
    assert f.to_dict()["total"] == f.total
    # mean pooling reads every token of the universal layer
    mean = joint_step_flops(
        SHAPE, mmlm_lengths=[6], mmlm_masked=[1], tlm_lengths=[4, 2], tlm_masked=[1, 1],
        xlco_query_lengths=[3], xlco_key_lengths=[5], contrast_layer=1, queue_size=7, pooling="mean",
    )
    assert mean.xlco_key == 2 * layer * 5 + 4 * 4 * 25 + 2 * 16
    assert mean.mmlm == f.mmlm


def test_base_mmlm_token_matches_the_cost_notes():
    # XLM-R base: ~6·85M per token for the body; the head on a masked token costs ~2.3× that.
    base = ModelShape(768, 3072, 12, 250_002)
    body = 6 * base.layer_params * 12
    assert body == pytest.approx(6 * 84.9e6, rel=0.01)
    assert 3 * mlm_head_forward_flops(1, base) / body == pytest.approx(2.27, rel=0.02)


def test_rejects_a_layer_outside_the_model():
    with pytest.raises(ValueError, match="contrast_layer=4"):
        joint_step_flops(SHAPE, mmlm_lengths=[], mmlm_masked=[], tlm_lengths=[], tlm_masked=[],
                         xlco_query_lengths=[], xlco_key_lengths=[], contrast_layer=4, queue_size=1)
    with pytest.raises(ValueError, match="pooling='max'"):
        joint_step_flops(SHAPE, mmlm_lengths=[], mmlm_masked=[], tlm_lengths=[], tlm_masked=[],
                         xlco_query_lengths=[], xlco_key_lengths=[], contrast_layer=1, queue_size=1, pooling="max")


def test_peak_table_and_mfu():
    assert peak_bf16_flops("NVIDIA H100 80GB HBM3") == 989.4e12
    assert peak_bf16_flops("NVIDIA H100 PCIe") == 756e12
    assert peak_bf16_flops("NVIDIA H200") == 989.4e12
    assert peak_bf16_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert peak_bf16_flops("Some Future GPU") is None
    assert mfu(4e12, 2.0, 10e12) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        mfu(1.0, 0.0, 1.0)


def test_the_training_log_counts_the_closed_form_flops(tmp_path):
    import contextlib
    import io
    import json

    from infoxlm.data.pipeline import DataPipeline
    from infoxlm.data.store import TokenStore
    from infoxlm.train.config import apply_overrides, resolve_config
    from infoxlm.train.flops import step_data_flops
    from infoxlm.train.loop import pretrain
    from infoxlm.train.presets import preset

    from test_loop import structured_store

    store = structured_store(tmp_path / "store")
    cfg = apply_overrides(preset("test"), ["optim.max_steps=2"])
    with contextlib.redirect_stdout(io.StringIO()):
        run = pretrain(cfg, store, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    resolved = resolve_config(apply_overrides(preset("test"), ["optim.max_steps=2"]))
    data = DataPipeline(TokenStore.open(store), resolved.data).step(1, 0, 1)
    shape = ModelShape(hidden_size=64, intermediate_size=128, num_layers=2, vocab_size=200)  # the tiny size
    c = resolved.contrast
    expected = step_data_flops(data, shape, c.layer, c.queue_size, c.pooling).total
    logged = rows[1]["tflops_per_s_per_device"] * 1e12 * rows[1]["seconds"]
    assert logged == pytest.approx(expected, rel=1e-6)
    assert rows[1]["tokens_per_s_per_device"] == pytest.approx(rows[1]["tokens_per_s"])  # one process
    assert "mfu" not in rows[1]  # no known peak for a CPU
