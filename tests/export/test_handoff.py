"""Handing a model on: `infoxlm export` to Hugging Face and sentence-transformers directories with
model cards, intermediate exports, Weights & Biases logs, MTEB, and `--init` from what was
handed on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from infoxlm import Encoder, embed
from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
from infoxlm.errors import InfoXLMError
from infoxlm.export.model_card import CARD_NAME

from conftest import TINY_TEXT

pytestmark = pytest.mark.slow  # end-to-end runs and subprocesses

# Beside ordinary lines: one letter, an empty line, outer spaces, and lines cut at 512 tokens.
SENTENCES = TINY_TEXT["de"] + TINY_TEXT["zh"] + ["x", "", " outer spaces ", "Open the file and save it. " * 120, "猫睡在温暖的沙发上。" * 100]


def cli(*args: str, env=None) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "infoxlm", *args], capture_output=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr.decode()
    return result


@pytest.fixture(scope="module")
def store(tiny_model_dir, tmp_path_factory) -> Path:
    """A real token store (the tiny tokenizer, four languages, two pairs)."""
    root = tmp_path_factory.mktemp("handoff")
    tokenizer = tiny_model_dir.parent / "tokenizer"
    for lang, lines in TINY_TEXT.items():
        (root / f"{lang}.txt").write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
        prepare_monolingual(lang, [root / f"{lang}.txt"], tokenizer, root / "store", show_progress=False)
    for xx in ("de", "ru"):
        prepare_parallel(f"en-{xx}", tokenizer, root / "store", src=root / "en.txt", tgt=root / f"{xx}.txt", show_progress=False)
    return root / "store"


@pytest.fixture(scope="module")
def run(store) -> Path:
    """`infoxlm pretrain --preset test --data S --max-steps 6 --output run`, exporting every 3 steps."""
    out = store.parent / "run"
    cli("pretrain", "--preset", "test", "--data", str(store), "--max-steps", "6", "--output", str(out), "--no-progress",
        "--set", "run.export_every=3")
    return out


def front_matter(directory: Path) -> dict[str, list[str] | str]:
    """The YAML front matter of a model card, as {key: value or list}."""
    text = (directory / CARD_NAME).read_text(encoding="utf-8")
    assert text.startswith("---\n")
    fields, key = {}, None
    for line in text.split("\n---\n", 1)[0].splitlines()[1:]:
        if line.startswith("- "):
            fields[key].append(line[2:])
        else:
            key, _, value = line.partition(":")
            fields[key] = value.strip() or []
    return fields


def test_export_writes_a_model_card_with_the_run_in_it(run, tmp_path, transformers):
    cli("export", str(run), str(tmp_path / "hf"))
    card = front_matter(tmp_path / "hf")
    assert card["language"] == ["de", "en", "ru", "zh"]
    assert card["library_name"] == "transformers" and "fill-mask" in card["tags"] and card["license"] == "unknown"
    text = (tmp_path / "hf" / CARD_NAME).read_text()
    for expected in ("Weights after step 6 of 6", "| en-de |", "loss/mmlm", "loss/xlco", '"max_steps": 6'):
        assert expected in text
    model, info = transformers.XLMRobertaForMaskedLM.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_sentence_transformers_encode_equals_infoxlm_embed(run, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    cli("export", str(run), str(tmp_path / "hf"))
    cli("export", str(run), str(tmp_path / "st"), "--format", "sentence-transformers", "--layer", "1")
    card = front_matter(tmp_path / "st")
    assert card["library_name"] == "sentence-transformers" and "sentence-similarity" in card["tags"]
    assert card["language"] == ["de", "en", "ru", "zh"]
    config = json.loads((tmp_path / "st" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    recorded = json.loads((tmp_path / "st" / "config_sentence_transformers.json").read_text())["infoxlm"]
    assert recorded == {"layer": 1, "pooling": "mean", "max_seq_length": 512, "source_layers": 2}
    model = st.SentenceTransformer(str(tmp_path / "st"), device="cpu")
    np.testing.assert_allclose(model.encode(SENTENCES), embed(tmp_path / "hf", SENTENCES, layer=1), atol=1e-5)


def test_sentence_transformers_cls_pooling_from_a_hugging_face_directory(tiny_model_dir, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    cli("export", str(tiny_model_dir), str(tmp_path / "st"), "--format", "sentence-transformers", "--layer", "2",
        "--pooling", "cls")
    model = st.SentenceTransformer(str(tmp_path / "st"), device="cpu")
    np.testing.assert_allclose(model.encode(SENTENCES), embed(tiny_model_dir, SENTENCES, layer=2, pooling="cls"), atol=1e-5)
    assert "base_model" not in front_matter(tmp_path / "st")  # a local path is no Hub id
    assert f"Converted from `{tiny_model_dir}`" in (tmp_path / "st" / CARD_NAME).read_text()


def test_sentence_transformers_layer_is_checked(tiny_model_dir, tmp_path):
    from infoxlm.cli import main

    for layer in ("0", "3"):
        with pytest.raises((SystemExit, InfoXLMError)):
            if main(["export", str(tiny_model_dir), str(tmp_path / "st"), "--format", "sentence-transformers", "--layer", layer]):
                raise SystemExit(1)
    assert not any(tmp_path.iterdir())


def test_mteb_bitext_mining_runs_on_the_export(run, tmp_path):
    mteb = pytest.importorskip("mteb")
    st = pytest.importorskip("sentence_transformers")
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    class LocalBitext(AbsTaskBitextMining):
        metadata = TaskMetadata(
            type="BitextMining", name="InfoXLMLocalBitext", main_score="accuracy", description="TINY_TEXT de-en",
            reference="https://example.org", dataset={"path": "NA", "revision": "NA"}, category="t2t",
            eval_splits=["test"], eval_langs=["deu-Latn", "eng-Latn"], date=("2026-01-01", "2026-01-01"),
            dialect=["Written"], domains=[], task_subtypes=[], license="cc-by-4.0", annotations_creators="derived",
            modalities=["text"], sample_creation="found", bibtex_citation="",
        )

        def load_data(self, num_proc=None, **kwargs):
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": TINY_TEXT["de"], "sentence2": TINY_TEXT["en"]})})
            self.data_loaded = True

    cli("export", str(run), str(tmp_path / "st"), "--format", "sentence-transformers", "--layer", "1")
    model = st.SentenceTransformer(str(tmp_path / "st"), device="cpu")
    result = mteb.evaluate(model, LocalBitext(), cache=None, show_progress_bar=False)
    score = result.task_results[0].scores["test"][0]
    assert 0 <= score["accuracy"] <= 1 and score["languages"] == ["deu-Latn", "eng-Latn"]


def test_export_every_writes_models_with_cards(run):
    exports = run / "exports"
    assert sorted(p.name for p in exports.iterdir()) == ["step-3", "step-6"]
    for step in (3, 6):
        assert f"Weights after step {step} of 6" in (exports / f"step-{step}" / CARD_NAME).read_text()
        assert Encoder.from_pretrained(exports / f"step-{step}").num_layers == 2
    last = load_file(exports / "step-6" / "model.safetensors")
    exported = load_file(Path(cli_export(run)) / "model.safetensors")
    assert last.keys() == exported.keys() and all(torch.equal(last[k], exported[k]) for k in last)


def cli_export(run: Path) -> Path:
    out = run.parent / "exported-for-comparison"
    cli("export", str(run), str(out), "--overwrite")
    return out


def test_init_from_a_run_or_a_sentence_transformers_directory(run, tmp_path):
    from infoxlm.train.model_build import encoder_to_continue

    exported = Encoder.from_pretrained(cli_export(run))
    from_run = encoder_to_continue(run)
    ours = exported.state_dict()  # the pooler is not trained, so not exported: both start it afresh
    assert all(torch.equal(v, ours[k]) for k, v in from_run.state_dict().items() if not k.startswith("pooler"))
    cli("export", str(run), str(tmp_path / "st"), "--format", "sentence-transformers", "--layer", "1")
    from_st = encoder_to_continue(tmp_path / "st")
    assert from_st.num_layers == 1
    assert all(torch.equal(v, ours[k]) for k, v in from_st.state_dict().items() if not k.startswith(("lm_head", "pooler")))


def test_wandb_offline_run_holds_the_losses_and_the_config(store, tmp_path):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    env = {**__import__("os").environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    cli("pretrain", "--preset", "test", "--data", str(store), "--max-steps", "6", "--output", str(tmp_path / "run"),
        "--no-progress", "--set", "run.wandb=true", "--set", "run.log_every=1", env=env)
    [path] = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    history, config = [], set()
    for raw in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
        elif kind == "run":
            config |= {item.key for item in record.run.config.update}
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(history) == len(logged) == 6
    for ours, theirs in zip(logged, history):
        assert theirs["_step"] == ours["step"]
        for key in ("loss/mmlm", "loss/tlm", "loss/xlco", "xlco/accuracy", "lr", "momentum", "grad_norm", "tokens_per_s"):
            assert theirs[key] == pytest.approx(ours[key])
    assert {"model", "data", "objectives", "contrast", "optim", "run"} <= config


def test_wandb_missing_is_one_line(tmp_path, monkeypatch):
    from infoxlm.train.metrics import WandbSink

    monkeypatch.setitem(sys.modules, "wandb", None)  # the import fails
    with pytest.raises(InfoXLMError, match=r'run.wandb=true needs the wandb package: pip install "infoxlm\[wandb\]"'):
        WandbSink(tmp_path, {}, project="p")


def wandb_records(path: Path):
    """The records of a W&B transaction log (.wandb): a 7-byte header, then LevelDB-style log
    chunks in 32 KiB blocks (crc32 4, length 2, type 1: full, first, middle, last)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield payload
        elif kind == 2:
            pending = payload
        elif kind == 3:
            pending += payload
        elif kind == 4:
            yield pending + payload
