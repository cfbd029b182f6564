"""Hugging Face checkpoint directories, both ways, and the checkpoints that must be refused."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from infoxlm import CheckpointError, Encoder, EncoderConfig

TOL = 1e-5


def test_saved_directory_loads_in_transformers_with_identical_logits(transformers, hf_mlm, hf_mlm_dir, mixed_batch, tmp_path):
    ours = Encoder.from_pretrained(hf_mlm_dir)
    ours.save_pretrained(tmp_path / "ours")
    reloaded, info = transformers.XLMRobertaForMaskedLM.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ids, mask = mixed_batch
    with torch.no_grad():
        expected = hf_mlm(input_ids=ids, attention_mask=mask).logits
        got = reloaded.eval()(input_ids=ids, attention_mask=mask).logits
    assert (expected - got)[mask.bool()].abs().max() <= TOL


def test_fresh_encoder_saves_for_both_transformers_classes(transformers, mixed_batch, tmp_path):
    torch.manual_seed(0)
    config = EncoderConfig.of_size("tiny", vocab_size=120, max_position_embeddings=40)
    ours = Encoder(config).eval()
    ids, mask = mixed_batch
    with torch.no_grad():
        out = ours(ids, mask)
        logits = ours.lm_head(out.last_hidden_state)

    ours.save_pretrained(tmp_path / "mlm")
    mlm, info = transformers.XLMRobertaForMaskedLM.from_pretrained(tmp_path / "mlm", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    # AutoModel has no MLM head; it is handed a bare-model directory.
    ours.save_pretrained(tmp_path / "bare", include_mlm_head=False)
    bare, info = transformers.AutoModel.from_pretrained(tmp_path / "bare", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        assert (mlm.eval()(input_ids=ids, attention_mask=mask).logits - logits)[mask.bool()].abs().max() <= TOL
        theirs = bare.eval()(input_ids=ids, attention_mask=mask)
    assert (theirs.last_hidden_state - out.last_hidden_state)[mask.bool()].abs().max() <= TOL
    assert (theirs.pooler_output - ours.pooled_output(out.last_hidden_state)).abs().max() <= TOL


def test_round_trip_keeps_every_weight(tmp_path):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=64))
    enc.save_pretrained(tmp_path / "a", include_mlm_head=False)
    back = Encoder.from_pretrained(tmp_path / "a")
    for (name, a), (_, b) in zip(enc.state_dict().items(), back.state_dict().items()):
        if not name.startswith("lm_head."):
            assert torch.equal(a, b), name
    assert back.loaded_parts == {"pooler"}
    assert json.loads((tmp_path / "a" / "config.json").read_text())["model_type"] == "xlm-roberta"


def test_pooler_from_a_checkpoint_is_kept(transformers, tmp_path):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=64))
    enc.save_pretrained(tmp_path / "bare", include_mlm_head=False)
    loaded = Encoder.from_pretrained(tmp_path / "bare")
    loaded.save_pretrained(tmp_path / "mlm")
    names = load_file(tmp_path / "mlm" / "model.safetensors").keys()
    assert "roberta.pooler.dense.weight" in names and "lm_head.dense.weight" in names


def test_pytorch_model_bin_is_read_without_running_code(hf_mlm, hf_mlm_dir, tmp_path, mixed_batch):
    path = tmp_path / "bin"
    path.mkdir()
    (path / "config.json").write_text((hf_mlm_dir / "config.json").read_text())
    torch.save(hf_mlm.state_dict(), path / "pytorch_model.bin")
    ids, mask = mixed_batch
    with torch.no_grad():
        a = Encoder.from_pretrained(path).eval()(ids, mask).last_hidden_state
        b = hf_mlm(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
    assert (a - b)[mask.bool()].abs().max() <= TOL


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch infoxlm-was-exploited",))


def test_pickled_code_is_refused(hf_mlm_dir, tmp_path, monkeypatch):
    path = tmp_path / "evil"
    path.mkdir()
    (path / "config.json").write_text((hf_mlm_dir / "config.json").read_text())
    torch.save({"x": _Exploit()}, path / "pytorch_model.bin")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match="pytorch_model.bin: refused"):
        Encoder.from_pretrained(path)
    assert not (tmp_path / "infoxlm-was-exploited").exists()


def test_sharded_safetensors_are_read(hf_mlm_dir, tmp_path, mixed_batch):
    tensors = load_file(hf_mlm_dir / "model.safetensors")
    path = tmp_path / "sharded"
    path.mkdir()
    (path / "config.json").write_text((hf_mlm_dir / "config.json").read_text())
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, path / shard, metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    a, b = Encoder.from_pretrained(path).state_dict(), Encoder.from_pretrained(hf_mlm_dir).state_dict()
    loaded = [k for k in a if not k.startswith("pooler.")]  # the file has no pooler: fresh, random
    assert all(torch.equal(a[k], b[k]) for k in loaded)


# --- checkpoints that must be refused, each with a message naming the problem ---------------


def _copy_checkpoint(src, dst, edit_config=None, edit_tensors=None):
    dst.mkdir()
    config = json.loads((src / "config.json").read_text())
    if edit_config:
        edit_config(config)
    (dst / "config.json").write_text(json.dumps(config))
    tensors = load_file(src / "model.safetensors")
    if edit_tensors:
        edit_tensors(tensors)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def test_refuses_a_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="not a directory"):
        Encoder.from_pretrained(tmp_path / "nowhere")


def test_refuses_a_directory_without_config(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        Encoder.from_pretrained(tmp_path)


def test_refuses_another_model_type(hf_mlm_dir, tmp_path):
    bad = _copy_checkpoint(hf_mlm_dir, tmp_path / "bert", edit_config=lambda c: c.update(model_type="bert"))
    with pytest.raises(CheckpointError, match="model_type is 'bert'"):
        Encoder.from_pretrained(bad)


def test_refuses_a_directory_without_weights(hf_mlm_dir, tmp_path):
    bad = tmp_path / "empty"
    bad.mkdir()
    (bad / "config.json").write_text((hf_mlm_dir / "config.json").read_text())
    with pytest.raises(CheckpointError, match="no weights found"):
        Encoder.from_pretrained(bad)


def test_refuses_missing_body_tensors(hf_mlm_dir, tmp_path):
    key = "roberta.encoder.layer.2.output.dense.weight"
    bad = _copy_checkpoint(hf_mlm_dir, tmp_path / "missing", edit_tensors=lambda t: t.pop(key))
    with pytest.raises(CheckpointError, match="encoder.layer.2.output.dense.weight"):
        Encoder.from_pretrained(bad)


def test_refuses_a_half_mlm_head(hf_mlm_dir, tmp_path):
    bad = _copy_checkpoint(hf_mlm_dir, tmp_path / "head", edit_tensors=lambda t: t.pop("lm_head.dense.weight"))
    with pytest.raises(CheckpointError, match="lm_head tensor"):
        Encoder.from_pretrained(bad)


def test_refuses_shapes_that_disagree_with_config(hf_mlm_dir, tmp_path):
    bad = _copy_checkpoint(hf_mlm_dir, tmp_path / "shape", edit_config=lambda c: c.update(intermediate_size=48))
    with pytest.raises(CheckpointError, match=r"'roberta.encoder.layer.0.intermediate.dense.bias' has shape \(64,\).*implies \(48,\)"):
        Encoder.from_pretrained(bad)


def test_refuses_a_corrupt_weights_file(hf_mlm_dir, tmp_path):
    bad = _copy_checkpoint(hf_mlm_dir, tmp_path / "corrupt")
    (bad / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        Encoder.from_pretrained(bad)


def test_a_checkpoint_without_head_gets_a_fresh_one(hf_mlm_dir, tmp_path):
    def drop_head(tensors):
        for k in [k for k in tensors if k.startswith("lm_head.")]:
            tensors.pop(k)

    headless = _copy_checkpoint(hf_mlm_dir, tmp_path / "headless", edit_tensors=drop_head)
    enc = Encoder.from_pretrained(headless)
    assert enc.loaded_parts == set()
    assert enc.lm_head.decoder.weight is enc.embeddings.word_embeddings.weight


def test_config_round_trips_through_hf_fields():
    config = EncoderConfig.of_size("large", vocab_size=1234)
    assert EncoderConfig.from_hf_dict(config.to_hf_dict()) == config
    with pytest.raises(ValueError, match="unknown encoder size 'huge'"):
        EncoderConfig.of_size("huge")


def test_a_model_trained_without_xlco_names_its_layer_for_what_it_is(tiny_model_dir, tmp_path):
    """A −XLCO run's export keeps its recipe's universal layer (an ablation is read where the full
    method is) but never calls it a contrast layer; every command takes the name from here."""
    import shutil

    from infoxlm.model.hub import RECORDED_CONTRAST_LAYER, UNCONTRASTED_LAYER, read_contrast_layer, record_contrast_layer, recorded_layer_rule
    from infoxlm.train.model_source import open_model

    for contrasted, rule in ((True, RECORDED_CONTRAST_LAYER), (False, UNCONTRASTED_LAYER)):
        model = shutil.copytree(tiny_model_dir, tmp_path / str(contrasted))
        record_contrast_layer(model, 2, contrasted)
        assert (read_contrast_layer(model), recorded_layer_rule(model)) == (2, rule)
        with open_model(model) as opened:
            assert opened.default_layer() == (2, rule)
    assert recorded_layer_rule(tmp_path / "nowhere") == RECORDED_CONTRAST_LAYER
