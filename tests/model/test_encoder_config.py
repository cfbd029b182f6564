"""EncoderConfig checks every field before anything is allocated."""

from __future__ import annotations

import json

import pytest

from infoxlm import CheckpointError, EncoderConfig


def test_named_sizes_are_valid_and_count_their_parameters():
    assert EncoderConfig.of_size("base").num_parameters == pytest.approx(278e6, rel=0.01)  # XLM-R base + head
    assert EncoderConfig.of_size("large").num_parameters == pytest.approx(561e6, rel=0.01)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_hidden_layers", 0, "num_hidden_layers is 0: expected a positive integer"),
        ("num_hidden_layers", True, "num_hidden_layers is true: expected a positive integer"),
        ("hidden_size", 768.0, "hidden_size is 768.0: expected a positive integer"),
        ("vocab_size", None, "vocab_size is null"),
        ("intermediate_size", "3072", 'intermediate_size is "3072"'),
        ("hidden_size", 770, "expected a multiple of num_attention_heads (12)"),
        ("attention_probs_dropout_prob", -0.1, "expected a number in [0, 1)"),
        ("layer_norm_eps", 0, "layer_norm_eps is 0: expected a positive number"),
        ("eos_token_id", -1, "eos_token_id is -1: expected an id in 0 … 250001"),
        ("hidden_act", "relu", 'hidden_act is "relu"'),
        ("num_hidden_layers", 2000, "num_hidden_layers is 2000: expected at most 1,024"),
        ("vocab_size", 10**8, "vocab_size is 100000000: the encoder would have 7.7e+10 parameters (308 GB in fp32)"),
    ],
)
def test_each_bad_field_is_named_with_what_is_allowed(field, value, message):
    with pytest.raises(ValueError) as err:
        EncoderConfig(**{field: value})
    assert message in str(err.value)


def test_a_config_json_error_names_the_file(tmp_path):
    fields = {**EncoderConfig().to_hf_dict(), "hidden_size": 10**9, "num_attention_heads": 1}
    (tmp_path / "config.json").write_text(json.dumps(fields))
    with pytest.raises(CheckpointError, match=r"config.json: hidden_size is 1000000000: the encoder would have .* parameters"):
        EncoderConfig.load(tmp_path)
