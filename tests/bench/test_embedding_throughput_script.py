"""benchmarks/embedding_throughput.py runs end to end on a tiny encoder and checks agreement."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    pytest.importorskip("semantra_multilingual")  # XLM-R's tokenizer.json ships with it
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its neighbour xlmr_assets
    spec = importlib.util.spec_from_file_location("embedding_throughput", BENCHMARKS / "embedding_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sentences_are_distinct_and_take_the_languages_in_turn(script):
    from infoxlm.demo import corpus

    languages = corpus.retrieval_languages("test")
    sentences = script.tatoeba_sentences(600)
    assert len(sentences) == 600 and len(set(sentences)) == 600  # more than Urdu's and Swahili's sets hold
    first_round = [corpus.retrieval_pairs(lang, "test")[0][0] for lang in languages]
    assert sentences[: len(languages)] == first_round  # one from each language, in order


@pytest.mark.slow
def test_both_sides_agree_and_are_timed(script, transformers, capsys):
    figures = script.main(["--encoder", "tiny", "--sentences", "30", "--repeat", "1", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["sentences"] == figures["sentences"] == 30 and figures["tokens"] > 30
    assert [entry["layer"] for entry in figures["layers"]] == [1, 2]  # tiny: 2 layers
    for entry in figures["layers"]:
        assert entry["max_abs_difference"] < script.AGREEMENT
        for side in ("infoxlm", "baseline"):
            assert len(entry[side]["wall_seconds"]) == 1 and entry[side]["sentences_per_s"] > 0
        walls = entry["baseline"]["wall_seconds"][0], entry["infoxlm"]["wall_seconds"][0]
        assert entry["speedup"] == pytest.approx(walls[0] / walls[1], rel=1e-9)


def test_a_baseline_that_disagrees_stops_the_run(script, transformers, monkeypatch):
    real = script.baseline_embedder
    monkeypatch.setattr(script, "baseline_embedder", lambda *a: (lambda layer, embed=real(*a): embed(layer) + np.float32(0.01)))
    with pytest.raises(SystemExit, match="differ by 0.01"):
        script.main(["--encoder", "tiny", "--sentences", "8", "--repeat", "1", "--layers", "1"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layers", "5"], "the tiny encoder has layers 0 … 2"),
        (["--sentences", "0"], "--sentences 0: expected a positive number"),
        (["--encoder", "huge"], "invalid choice: 'huge'"),
    ],
)
def test_bad_options_are_usage_errors(script, capsys, args, message):
    with pytest.raises(SystemExit):
        script.main(["--encoder", "tiny", "--no-baseline", *args])
    assert message in capsys.readouterr().err
