"""WikiANN and UD-POS: first-sub-token labels, sentence pieces, and the commands end to end on
the shipped demo checkpoint with tiny files in XTREME's layouts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from infoxlm import Tokenizer
from infoxlm.cli import main
from infoxlm.eval.tagging_data import PANX_LABELS, TaggedSentence
from infoxlm.eval.xtreme_score import xtreme_score
from infoxlm.finetune.tagging_features import IGNORE, encode_sentences

DEMO = Path(__file__).resolve().parents[2] / "src" / "infoxlm" / "demo" / "checkpoint"
ENTITIES = [("Angela Merkel", "PER"), ("Paris", "LOC"), ("Siemens AG", "ORG")]
FILLER = "the city is near a river".split()
UPOS = {"the": "DET", "city": "NOUN", "is": "AUX", "near": "ADP", "a": "DET", "river": "NOUN"}


def toy_panx(rng: random.Random) -> tuple[list[str], list[str]]:
    name, kind = rng.choice(ENTITIES)
    words, at = rng.sample(FILLER, 3), rng.randrange(4)
    entity = name.split()
    return (words[:at] + entity + words[at:],
            ["O"] * at + [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1) + ["O"] * (3 - at))


def write_panx(root: Path, languages=("en", "de", "fr"), n=6) -> Path:
    """root/xx/{train,dev,test}: word<TAB>label lines, a blank line between sentences."""
    rng = random.Random(0)
    for lang in languages:
        (root / lang).mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev", "test"):
            sentences = [toy_panx(rng) for _ in range(n)]
            (root / lang / split).write_text(
                "".join("".join(f"{w}\t{t}\n" for w, t in zip(*s)) + "\n" for s in sentences), encoding="utf-8")
    return root


def write_udpos_conllu(root: Path, languages=("en", "de"), n=6) -> Path:
    """root/xx/xx_toy-ud-{train,dev,test}.conllu, UD's CoNLL-U."""
    rng = random.Random(1)
    for lang in languages:
        (root / lang).mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev", "test"):
            lines = []
            for k in range(n):
                words = rng.sample(FILLER, 4)
                lines += [f"# sent_id = {k}"] + [f"{i}\t{w}\t{w}\t{UPOS[w]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(words, 1)] + [""]
            (root / lang / f"{lang}_toy-ud-{split}.conllu").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_labels_sit_on_each_words_first_sub_token_and_long_sentences_are_cut_into_pieces():
    tok = Tokenizer.from_pretrained(DEMO)
    ids = {label: i for i, label in enumerate(PANX_LABELS)}
    sentence = TaggedSentence(("Siemensgesellschaft", "in", "Berlin"), ("B-ORG", "O", "B-LOC"), "x:1")
    (f,) = encode_sentences(tok, [sentence], ids, max_length=128)
    pieces = [tok.encode(w, add_special_tokens=False) for w in sentence.words]
    assert f.input_ids == [tok.bos_id, *pieces[0], *pieces[1], *pieces[2], tok.eos_id]
    assert f.first == [1, 1 + len(pieces[0]), 1 + len(pieces[0]) + len(pieces[1])]
    assert [f.labels[p] for p in f.first] == [ids["B-ORG"], ids["O"], ids["B-LOC"]]
    assert sum(label != IGNORE for label in f.labels) == 3 and len(pieces[0]) > 1
    short = encode_sentences(tok, [sentence], ids, max_length=len(pieces[0]) + 2)
    assert [x.first for x in short][0] == [1] and sum(len(x.first) for x in short) == 3
    assert all(len(x.input_ids) <= len(pieces[0]) + 2 for x in short)


@pytest.mark.slow
def test_finetune_wikiann_writes_results_and_xtreme_predictions_that_xtreme_score_reproduces(tmp_path, capsys):
    data = write_panx(tmp_path / "panx")
    run = tmp_path / "runs" / "panx"
    assert main(["finetune", "wikiann", "--model", str(DEMO), "--data", str(data), "--languages", "en", "de", "fr",
                 "--output", str(run), "--max-steps", "2", "--epochs", "1", "--no-save-model", "--no-progress"]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["task"] == "wikiann" and results["languages"] == ["en", "de", "fr"]
    assert results["runs"][0]["evaluations"] and results["protocol"].startswith("XTREME")
    for lang in ("en", "de", "fr"):
        predicted = run / "predictions" / "panx" / f"test-{lang}.tsv"
        assert predicted.read_text() == (run / "seed-0" / "predictions" / "panx" / f"test-{lang}.tsv").read_text()
        assert xtreme_score("panx", data / lang / "test", predicted) == pytest.approx(results["mean"]["test"][lang])


@pytest.mark.slow
def test_finetune_udpos_reads_conllu_and_reports_token_accuracy(tmp_path):
    data = write_udpos_conllu(tmp_path / "udpos")
    run = tmp_path / "runs" / "udpos"
    assert main(["finetune", "udpos", "--model", str(DEMO), "--data", str(data), "--languages", "en", "de",
                 "--output", str(run), "--max-steps", "2", "--epochs", "1", "--selection", "all-dev", "--no-progress"]) == 0
    results = json.loads((run / "results.json").read_text())
    assert set(results["mean"]["test"]["de"]) == {"f1", "precision", "recall", "accuracy"}
    assert "average_accuracy" in results["mean"] and set(results["runs"][0]["dev"]) == {"en", "de"}
    assert (run / "seed-0" / "model" / "model.safetensors").is_file()
    assert len((run / "predictions" / "udpos" / "test-de.tsv").read_text().split("\n\n")) == 6 + 1


def test_bad_input_stops_in_one_line_before_training(tmp_path, capsys):
    data = write_panx(tmp_path / "panx", languages=("en", "de"))
    (data / "de" / "test").write_text("Berlin\tB-CITY\n", encoding="utf-8")
    args = ["finetune", "wikiann", "--model", str(DEMO), "--data", str(data), "--languages", "en", "de",
            "--output", str(tmp_path / "run"), "--max-steps", "1", "--no-progress"]
    assert main(args) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"infoxlm: error: {data / 'de' / 'test'}:1: label 'B-CITY' is not in the task's label set; "
        f"expected one of {' '.join(PANX_LABELS)}")
    (data / "de" / "test").write_text("\n", encoding="utf-8")
    assert main(args) == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith("test: no sentences; expected word<TAB>label lines, a blank line between sentences")
    (data / "en" / "dev").unlink()
    assert main(args) == 1
    assert "no dev file for en (--selection en-dev needs it)" in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "run").exists()
