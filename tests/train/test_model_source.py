"""One model argument: a Hugging Face directory, a sentence-transformers export or a run
directory, read the same way by embed, eval tatoeba, export, finetune and --init, with one
default layer."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from infoxlm import Encoder, Tokenizer, embed
from infoxlm.cli import main
from infoxlm.errors import InfoXLMError
from infoxlm.export.sentence_transformers import write_sentence_transformers
from infoxlm.train.model_source import HUGGING_FACE, RUN, SENTENCE_TRANSFORMERS, open_model, resolve_model

from conftest import TINY_TEXT
from training_stores import write_store

SENTENCES = TINY_TEXT["de"] + TINY_TEXT["en"]


def command(capsys, *argv: str) -> tuple[str, str]:
    """(stdout, stderr without progress bars) of a command that must succeed."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, "\n".join(line for line in err.splitlines() if line and "%|" not in line and "it/s" not in line)


def error(capsys, *argv: str) -> str:
    """The one stderr line of a command that must fail."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def st_export(tiny_model_dir: Path, out: Path, layer: int, pooling: str) -> Path:
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    return write_sentence_transformers(encoder, tokenizer, out, layer=layer, pooling=pooling)


# --- the three forms, without a run -------------------------------------------------------------


def test_a_hugging_face_directory_is_read_where_it_is(tiny_model_dir):
    source = resolve_model(tiny_model_dir)
    assert (source.kind, source.weights, source.tokenizer, source.step) == (HUGGING_FACE, tiny_model_dir, tiny_model_dir, None)
    with open_model(tiny_model_dir) as model:
        assert model.directory == tiny_model_dir and model.recorded_layer is None
        assert model.layer(None) == (1, "the middle layer of 2")  # no contrast layer recorded, not 12 or 24 layers
        assert model.layer(2) == (2, "--layer") and model.pooling(None) == "mean"


def test_a_sentence_transformers_export_gives_its_layer_and_pooling(tiny_model_dir, tmp_path):
    st = st_export(tiny_model_dir, tmp_path / "st", layer=1, pooling="cls")
    source = resolve_model(st)
    assert (source.kind, source.weights, source.pooling) == (SENTENCE_TRANSFORMERS, st, "cls")
    with open_model(st) as model:
        assert model.num_layers == 1
        assert model.layer(None) == (1, "the layer the sentence-transformers export pools, its last")
        assert model.pooling(None) == "cls" and model.pooling("mean") == "mean"
    # embed's defaults are the export's: its layer and its pooling
    np.testing.assert_allclose(embed(st, SENTENCES), embed(tiny_model_dir, SENTENCES, layer=1, pooling="cls"), atol=1e-5)


def test_a_sentence_transformers_pooling_infoxlm_has_not_is_named(tiny_model_dir, tmp_path):
    st = st_export(tiny_model_dir, tmp_path / "st", layer=2, pooling="mean")
    pooling_file = st / "1_Pooling" / "config.json"
    flags = json.loads(pooling_file.read_text())
    pooling_file.write_text(json.dumps({**flags, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}))
    with open_model(st) as model:
        with pytest.raises(InfoXLMError, match=rf"{pooling_file}: pooling 'max'; infoxlm pools mean or cls"):
            model.pooling(None)
        assert model.pooling("mean") == "mean"
    (st / "modules.json").write_text(json.dumps([{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    with pytest.raises(InfoXLMError, match="modules.json: names no sentence_transformers.models.Transformer"):
        resolve_model(st)


def test_what_is_no_model_is_refused_in_one_line(tiny_model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("hello\n")
    embed_args = ["embed", "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"]
    assert "does not exist; expected a Hugging Face XLM-R directory, a sentence-transformers export or an `infoxlm pretrain` run" in (
        error(capsys, *embed_args, "--model", tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    assert "no config.json, modules.json or checkpoints/" in error(capsys, *embed_args, "--model", tmp_path / "empty")
    assert "is a token store (what `infoxlm prepare` writes), not a model" in error(
        capsys, *embed_args, "--model", write_store(tmp_path / "store"))
    err = error(capsys, *embed_args, "--model", tiny_model_dir, "--step", "3")
    assert err == f"infoxlm: error: --step 3: {tiny_model_dir} is a Hugging Face directory, not a run directory with checkpoints"
    assert not (tmp_path / "v.npy").exists()


def test_a_run_without_checkpoints_says_so_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"optim": {}, "run": {}, "contrast": {"layer": 1}}))
    (tmp_path / "in.txt").write_text("hello\n")
    for argv in (["embed", "--model", run, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"],
                 ["eval", "tatoeba", "--model", run, "--data", tmp_path, "--langs", "de", "--output", tmp_path / "t.json"],
                 ["export", run, tmp_path / "out", "--format", "sentence-transformers"]):
        err = error(capsys, *argv)
        assert f"{run}: a run directory with no checkpoint yet" in err, err
    # before, embed read config.json as a Hugging Face one: "model_type is None; expected one of ['xlm-roberta']"


def hugging_face_with_checkpoints(tiny_model_dir: Path, folder: Path, run: Path | None = None) -> Path:
    """A Hugging Face directory that also holds a run's checkpoints/ and tokenizer/ (``run``'s,
    or a stand-in step 2)."""
    both = Path(shutil.copytree(tiny_model_dir, folder))
    if run is not None:
        for name in ("checkpoints", "tokenizer"):
            shutil.copytree(run / name, both / name)
    else:
        (both / "checkpoints" / "step-00000002").mkdir(parents=True)
        (both / "checkpoints" / "step-00000002" / "state.pt").write_bytes(b"")
    return both


def test_a_hugging_face_directory_with_checkpoints_is_refused_without_a_step(tiny_model_dir, tmp_path, capsys):
    """Read as a run, such a directory gave the checkpoint's vectors instead of its own
    model.safetensors' without a word."""
    both = hugging_face_with_checkpoints(tiny_model_dir, tmp_path / "both")
    (tmp_path / "in.txt").write_text("hello\n")
    err = error(capsys, "embed", "--model", both, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy")
    assert err == (
        f"infoxlm: error: --model {both}: holds both a Hugging Face model (config.json, model.safetensors) and a run's "
        f"checkpoints ({both / 'checkpoints'}, steps [2]); pass --step N to read a checkpoint, or move checkpoints/ out "
        "of it to read the Hugging Face model"
    )
    assert not (tmp_path / "v.npy").exists()
    # --init has no --step: the way to a checkpoint is its export
    with pytest.raises(InfoXLMError, match=r"or pass the output of `infoxlm export .* OUT --step N` to read a checkpoint$"):
        resolve_model(both, flag="--init", step_flag=None)
    with pytest.raises(InfoXLMError, match=r"pass step=N to read a checkpoint"):
        embed(both, SENTENCES)
    # a step names the checkpoint: the choice is explicit
    assert resolve_model(both, 2).kind == RUN


# --- a run directory ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tiny_run) -> Path:
    return tiny_run


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory) -> Path:
    """The run's latest checkpoint as `infoxlm export` writes it."""
    out = tmp_path_factory.mktemp("exported") / "hf"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["export", str(run), str(out)]) == 0
    return out


def laser(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "tatoeba.deu-eng.deu").write_text("\n".join(TINY_TEXT["de"]) + "\n", encoding="utf-8")
    (folder / "tatoeba.deu-eng.eng").write_text("\n".join(TINY_TEXT["en"]) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_embed_eval_and_export_use_the_runs_contrast_layer(run, exported, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    said = "layer 2 (the contrast layer the model records), mean pooling"
    # embed
    _, err = command(capsys, "embed", "--model", run, "--input", tmp_path / "in.txt", "--output", tmp_path / "run.npy")
    assert err == f"embedded {len(SENTENCES)} sentences → 64 dimensions: {run} (run directory, checkpoint step 2), {said}"
    from_run = np.load(tmp_path / "run.npy")
    np.testing.assert_allclose(from_run, embed(exported, SENTENCES, layer=2), atol=1e-5)
    assert not np.allclose(from_run, embed(exported, SENTENCES, layer=1), atol=1e-3)
    # eval tatoeba
    out, _ = command(capsys, "eval", "tatoeba", "--model", run, "--data", laser(tmp_path / "data"), "--no-progress",
                     "--output", tmp_path / "t.json")
    result = json.loads((tmp_path / "t.json").read_text())
    assert (result["layer"], result["layer_rule"]) == (2, "the contrast layer the model records")
    assert out.startswith("layer 2 (the contrast layer the model records; mean pooling)")
    # export --format sentence-transformers
    out, _ = command(capsys, "export", run, tmp_path / "st", "--format", "sentence-transformers")
    assert f"(sentence-transformers, {said})" in out
    assert json.loads((tmp_path / "st" / "config_sentence_transformers.json").read_text())["infoxlm"]["layer"] == 2
    # … and the export, given back to embed, gives the run's vectors
    command(capsys, "embed", "--model", tmp_path / "st", "--input", tmp_path / "in.txt", "--output", tmp_path / "st.npy")
    np.testing.assert_allclose(np.load(tmp_path / "st.npy"), from_run, atol=1e-5)


@pytest.mark.slow
def test_step_picks_a_runs_checkpoint(run, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    common = ["--input", tmp_path / "in.txt", "--layer", "2"]
    _, err = command(capsys, "embed", "--model", run, "--step", "1", *common, "--output", tmp_path / "one.npy")
    assert "checkpoint step 1" in err
    command(capsys, "embed", "--model", run, *common, "--output", tmp_path / "two.npy")
    assert not np.allclose(np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy"), atol=1e-4)
    err = error(capsys, "embed", "--model", run, "--step", "9", *common, "--output", tmp_path / "v.npy")
    assert f"--step 9: {run} has no checkpoint of that step; available: [1, 2]" in err
    err = error(capsys, "embed", "--model", run, "--input", tmp_path / "in.txt", "--layer", "7", "--output", tmp_path / "v.npy")
    assert f"--layer 7: {run} (run directory, checkpoint step 2) has 2 layers" in err


@pytest.mark.slow
def test_step_picks_the_checkpoint_of_a_hugging_face_directory_that_holds_both(run, tiny_model_dir, tmp_path, capsys):
    both = hugging_face_with_checkpoints(tiny_model_dir, tmp_path / "both", run)
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    common = ["--input", tmp_path / "in.txt", "--layer", "2"]
    _, err = command(capsys, "embed", "--model", both, "--step", "2", *common, "--output", tmp_path / "both.npy")
    assert f"{both} (run directory, checkpoint step 2), layer 2" in err  # the choice, said
    command(capsys, "embed", "--model", run, "--step", "2", *common, "--output", tmp_path / "run.npy")
    np.testing.assert_allclose(np.load(tmp_path / "both.npy"), np.load(tmp_path / "run.npy"), atol=1e-6)


@pytest.mark.slow
def test_export_converts_each_form(run, exported, tiny_model_dir, tmp_path, capsys):
    # a run's export keeps the contrast layer in config.json, and so does an export of that export
    assert json.loads((exported / "config.json").read_text())["infoxlm_contrast_layer"] == 2
    command(capsys, "export", exported, tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["infoxlm_contrast_layer"] == 2
    # a Hugging Face directory without --layer: the rule's layer (the middle of 2), said
    out, _ = command(capsys, "export", tiny_model_dir, tmp_path / "st", "--format", "sentence-transformers")
    assert "layer 1 (the middle layer of 2), mean pooling" in out
    # a sentence-transformers export as SRC: its layer and pooling carry over
    st = st_export(tiny_model_dir, tmp_path / "st-cls", layer=2, pooling="cls")
    out, _ = command(capsys, "export", st, tmp_path / "st-again", "--format", "sentence-transformers")
    assert "layer 2 (the layer the sentence-transformers export pools, its last), cls pooling" in out
    recorded = json.loads((tmp_path / "st-again" / "config_sentence_transformers.json").read_text())["infoxlm"]
    assert (recorded["layer"], recorded["pooling"]) == (2, "cls")


@pytest.mark.slow
def test_init_from_a_run_checks_the_runs_tokenizer(run, tmp_path):
    from infoxlm.train.config import apply_overrides
    from infoxlm.train.loop import pretrain
    from infoxlm.train.presets import preset

    config = apply_overrides(preset("test"), ["optim.max_steps=1", "contrast.layer=2", f"model.init={run}"])
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        pretrain(config, run.parent / "store", tmp_path / "continued", progress=False)
    assert "has no tokenizer file" not in err.getvalue()  # RUN/tokenizer is the run's, and the store's
