"""Shared fixtures: tiny random XLM-R checkpoints written by transformers itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

TINY = dict(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=40,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
)


@pytest.fixture(scope="session")
def transformers():
    tf = pytest.importorskip("transformers")
    tf.logging.set_verbosity_error()
    return tf


@pytest.fixture
def hf_mlm(transformers):
    """A random transformers XLMRobertaForMaskedLM (eval mode) with non-trivial LayerNorms and biases."""
    torch.manual_seed(0)
    model = transformers.XLMRobertaForMaskedLM(transformers.XLMRobertaConfig(**TINY)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))  # fresh init has 1/0 there: perturb to test them
    return model


@pytest.fixture
def hf_mlm_dir(hf_mlm, tmp_path):
    path = tmp_path / "hf-mlm"
    hf_mlm.save_pretrained(path)
    return path


@pytest.fixture
def mixed_batch():
    """Three sentences of lengths 10, 6 and 3, right-padded with <pad> = 1: (input_ids, attention_mask)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.full((3, 10), 1)
    for row, length in enumerate([10, 6, 3]):
        ids[row, :length] = torch.randint(4, TINY["vocab_size"], (length,), generator=g)
        ids[row, 0], ids[row, length - 1] = 0, 2
    return ids, ids.ne(1).long()


# A few lines per language, enough to learn a small vocabulary.
TINY_TEXT = {
    "en": ["The cat sleeps on the warm sofa.", "Open the file and save it.", "We walked to the old bridge."],
    "de": ["Die Katze schläft auf dem warmen Sofa.", "Öffne die Datei und speichere sie.", "Wir gingen zur alten Brücke."],
    "ru": ["Кошка спит на тёплом диване.", "Откройте файл и сохраните его.", "Мы пошли к старому мосту."],
    "zh": ["猫睡在温暖的沙发上。", "打开文件并保存。", "我们走到了那座旧桥。"],
}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random encoder saved with a tokenizer learned from TINY_TEXT: a complete model directory."""
    from infoxlm import Encoder, EncoderConfig, train_tokenizer

    root = tmp_path_factory.mktemp("tiny-model")
    files = {}
    for lang, lines in TINY_TEXT.items():
        path = root / f"{lang}.txt"
        path.write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
        files[lang] = [path]
    tokenizer = train_tokenizer(files, root / "tokenizer", vocab_size=150, show_progress=False)
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig.of_size("tiny", vocab_size=tokenizer.vocab_size))
    return encoder.save_pretrained(root / "model", tokenizer)


@pytest.fixture(scope="session")
def tiny_run(tiny_model_dir, tmp_path_factory):
    """A run directory of `infoxlm pretrain`: two steps of the test preset on a store of TINY_TEXT
    (en, de, en-de) tokenized with the tiny model's tokenizer, contrasting on layer 2 of 2 (the
    default-layer rule without a recorded layer gives 1), a checkpoint after each step."""
    import contextlib
    import io

    from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
    from infoxlm.train.config import apply_overrides
    from infoxlm.train.loop import pretrain
    from infoxlm.train.presets import preset

    root = tmp_path_factory.mktemp("tiny-run")
    tokenizer = tiny_model_dir.parent / "tokenizer"
    for lang in ("en", "de"):
        (root / f"{lang}.txt").write_text("\n".join(TINY_TEXT[lang] * 5) + "\n", encoding="utf-8")
        prepare_monolingual(lang, [root / f"{lang}.txt"], tokenizer, root / "store", show_progress=False)
    prepare_parallel("en-de", tokenizer, root / "store", src=root / "en.txt", tgt=root / "de.txt", show_progress=False)
    config = apply_overrides(preset("test"), ["optim.max_steps=2", "run.save_every=1", "contrast.layer=2"])
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pretrain(config, root / "store", root / "run", progress=False)
    return root / "run"


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """The Hugging Face Hub out of reach (HF_DATASETS_OFFLINE) and an empty datasets cache,
    whose path this returns: every hf: input is then refused as not downloaded."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return tmp_path / "hf-cache"


@pytest.fixture(scope="module")
def built_store(tmp_path_factory) -> Path:
    """A token store of a few languages and pairs (``training_stores.build_store``), one per module."""
    from training_stores import build_store

    root = tmp_path_factory.mktemp("built") / "store"
    build_store(root)
    return root


# Hostile-input tests of embed and eval share it.
@pytest.fixture
def tatoeba(tmp_path) -> Path:
    data = tmp_path / "tatoeba"
    data.mkdir()
    (data / "tatoeba.deu-eng.deu").write_text("Die Katze schläft.\nÖffne die Datei.\n")
    (data / "tatoeba.deu-eng.eng").write_text("The cat sleeps.\nOpen the file.\n")
    return data
