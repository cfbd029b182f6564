"""The one default-layer rule every command shares."""

from __future__ import annotations

from infoxlm.model.sentence_layer import RECORDED_CONTRAST_LAYER, default_layer


def test_the_recorded_contrast_layer_wins_then_xtremes_then_the_middle():
    assert default_layer(12, recorded=5) == (5, RECORDED_CONTRAST_LAYER)  # what the model aligned, even at 12 layers
    assert default_layer(4, recorded=2) == (2, "the contrast layer the model records")
    assert default_layer(12) == (8, "XTREME: layer 7 of 12 above the embeddings")
    assert default_layer(24)[0] == 14  # XTREME's run_tatoeba.sh: layer 13 for xlm-roberta-large
    assert default_layer(4, recorded=9) == (2, "the middle layer of 4")  # outside the model: ignored
    assert default_layer(4, recorded=0) == (2, "the middle layer of 4")  # the embedding output is no contrast layer
    assert default_layer(3)[0] == 2 and default_layer(6)[0] == 3
    assert default_layer(2, 2, "the layer a sentence-transformers export pools") == (2, "the layer a sentence-transformers export pools")
