"""Tatoeba retrieval: the LASER file format, both directions, layer-wise output."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from infoxlm import Encoder, Tokenizer
from infoxlm.embedding import embed_layers
from infoxlm.eval.retrieval import retrieval_accuracy
from infoxlm.eval.tatoeba import EvalDataError, evaluate_tatoeba, load_pairs, resolve_languages

from conftest import TINY_TEXT


def write_laser(folder, code, xx, en):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"tatoeba.{code}-eng.{code}").write_text("\n".join(xx) + "\n", encoding="utf-8")
    (folder / f"tatoeba.{code}-eng.eng").write_text("\n".join(en) + "\n", encoding="utf-8")


def test_retrieval_accuracy_by_hand():
    en = np.eye(4, dtype=np.float32)
    xx = en.copy()
    xx[3] = en[2] * 2  # sentence 3 lands on sentence 2 (cosine ignores the scale)
    scores = retrieval_accuracy(xx, en)
    assert scores == {"xx2en": 75.0, "en2xx": 75.0}
    xx[3] = [0, 0, 0.9, 1.0]  # nearer to en[3] than to en[2], but en[2] now prefers xx[2] still
    assert retrieval_accuracy(xx, en)["xx2en"] == 100.0


def test_identical_sentences_are_found_at_every_layer(tiny_model_dir, tmp_path):
    sentences = [s for lines in TINY_TEXT.values() for s in lines]
    write_laser(tmp_path, "deu", sentences, sentences)
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    result = evaluate_tatoeba(encoder, tokenizer, str(tmp_path), ["deu"], [0, 1, 2])
    for k in (0, 1, 2):
        assert result["layers"][k]["languages"]["deu"] == {"xx2en": 100.0, "en2xx": 100.0, "n": 12}


def test_the_vectors_scored_are_handed_back_when_asked_for(tiny_model_dir, tmp_path):
    write_laser(tmp_path, "deu", TINY_TEXT["de"], TINY_TEXT["en"])
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    vectors: dict = {}
    evaluate_tatoeba(encoder, tokenizer, str(tmp_path), ["deu"], [1, 2], vectors=vectors)
    xx, en = vectors["deu"]
    assert sorted(xx) == sorted(en) == [1, 2] and xx[2].shape == (3, encoder.config.hidden_size)
    np.testing.assert_array_equal(en[1], embed_layers(encoder, tokenizer, TINY_TEXT["en"], [1])[1])


def test_english_that_several_files_hold_is_embedded_once_and_scores_as_alone(tiny_model_dir, tmp_path, monkeypatch):
    """A multi-parallel set (every language translating the same English, as the demo's splits
    do) embedded the same English once per language."""
    import infoxlm.eval.tatoeba as tatoeba

    en = TINY_TEXT["en"]
    files = {"deu": (TINY_TEXT["de"], en), "rus": (TINY_TEXT["ru"], en[:2] + ["Only in the Russian file."])}
    for code, (xx, eng) in files.items():
        write_laser(tmp_path / "all", code, xx, eng)
        write_laser(tmp_path / code, code, xx, eng)
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    alone = {code: evaluate_tatoeba(encoder, tokenizer, str(tmp_path / code), [code], [0, 1, 2]) for code in files}
    embedded = []
    real = tatoeba.embed_layers
    monkeypatch.setattr(tatoeba, "embed_layers", lambda e, t, sentences, *a, **k: embedded.extend(sentences) or real(e, t, sentences, *a, **k))
    together = evaluate_tatoeba(encoder, tokenizer, str(tmp_path / "all"), list(files), [0, 1, 2])
    english = [s for s in embedded if s in set(en) | {"Only in the Russian file."}]
    assert sorted(english) == sorted(set(en) | {"Only in the Russian file."})  # each once
    assert "Only in the Russian file." in embedded and len(embedded) == len(set(en)) + 1 + 2 * len(en)
    for code in files:
        for k in (0, 1, 2):
            assert together["layers"][k]["languages"][code] == alone[code]["layers"][k]["languages"][code]


def test_languages_sets_and_codes(tmp_path):
    write_laser(tmp_path, "deu", ["a"], ["b"])
    write_laser(tmp_path, "swh", ["c"], ["d"])
    assert resolve_languages(None, str(tmp_path)) == ["deu", "swh"]
    assert resolve_languages(["paper14"], str(tmp_path))[:3] == ["ara", "bul", "deu"]
    assert len(resolve_languages(["xtreme36"], str(tmp_path))) == 36
    assert resolve_languages(["zh", "fa", "deu"], str(tmp_path)) == ["cmn", "pes", "deu"]


def test_bad_files_are_named(tmp_path):
    write_laser(tmp_path, "deu", ["a", "b"], ["a"])
    with pytest.raises(EvalDataError, match=r"tatoeba.deu-eng.deu has 2 lines but .*tatoeba.deu-eng.eng has 1"):
        load_pairs(str(tmp_path), "deu")
    with pytest.raises(EvalDataError, match="tatoeba.fra-eng.fra: missing"):
        load_pairs(str(tmp_path), "fra")
    (tmp_path / "tatoeba.deu-eng.eng").write_bytes(b"a\nb\xfe\n")
    with pytest.raises(EvalDataError, match=r"tatoeba.deu-eng.eng:2: invalid UTF-8"):
        load_pairs(str(tmp_path), "deu")



def test_a_line_too_long_to_embed_is_cut_while_read_counted_and_scores_as_its_start(tiny_model_dir, tmp_path, monkeypatch):
    import infoxlm.corpus.text_files as text_files

    long = " ".join(TINY_TEXT["de"]) * 30_000  # ~3M characters, more than a block of the reader
    write_laser(tmp_path / "long", "deu", [long] + TINY_TEXT["de"][1:], TINY_TEXT["en"])
    write_laser(tmp_path / "start", "deu", [long[: 64 * 512]] + TINY_TEXT["de"][1:], TINY_TEXT["en"])
    held = []  # the longest text decoded by the reader: the line is never held whole
    real = text_files._Read._block
    monkeypatch.setattr(text_files._Read, "_block", lambda self, body, bom: held.append(len(body)) or real(self, body, bom))
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    cut = evaluate_tatoeba(encoder, tokenizer, str(tmp_path / "long"), ["deu"], [1, 2])
    assert max(held) < text_files.DEFAULT_BLOCK_BYTES + 4 * (64 * 512 + 2)
    assert cut["cut_lines"] == {str(tmp_path / "long" / "tatoeba.deu-eng.deu"): 1}
    start = evaluate_tatoeba(encoder, tokenizer, str(tmp_path / "start"), ["deu"], [1, 2])
    assert cut["layers"] == start["layers"] and start["cut_lines"] == {}


@pytest.mark.slow
def test_hf_data_offline_and_not_cached_is_refused_as_prepare_refuses(offline_hub):
    with pytest.raises(EvalDataError) as error:
        load_pairs("hf:xtreme", "deu")
    assert str(error.value) == (
        f"hf:xtreme (config 'tatoeba.deu', split 'validation'): not in the local cache ({offline_hub}) and "
        "offline (HF_DATASETS_OFFLINE is set); expected a dataset downloaded before, with network access"
    )


def test_command_writes_json_and_the_layerwise_png(tiny_model_dir, tmp_path):
    write_laser(tmp_path / "data", "deu", TINY_TEXT["de"], TINY_TEXT["en"])
    write_laser(tmp_path / "data", "rus", TINY_TEXT["ru"], TINY_TEXT["en"])
    base = [sys.executable, "-m", "infoxlm", "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tmp_path / "data"), "--no-progress"]
    one = subprocess.run([*base, "--layer", "1", "--output", str(tmp_path / "one.json")], capture_output=True, timeout=120)
    assert one.returncode == 0, one.stderr.decode()
    block = json.loads((tmp_path / "one.json").read_text())
    assert block["layer"] == 1 and block["pooling"] == "mean" and set(block["languages"]) == {"deu", "rus"}
    assert block["languages"]["deu"]["n"] == 3
    assert block["average"]["xx2en"] == pytest.approx((block["languages"]["deu"]["xx2en"] + block["languages"]["rus"]["xx2en"]) / 2)
    every = subprocess.run([*base, "--layer", "all", "--output", str(tmp_path / "all.json")], capture_output=True, timeout=120)
    assert every.returncode == 0, every.stderr.decode()
    layers = json.loads((tmp_path / "all.json").read_text())["layers"]
    assert set(layers) == {"0", "1", "2"}
    assert (tmp_path / "all.png").read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run([*base, "--layer", "9", "--output", str(tmp_path / "x.json")], capture_output=True, timeout=120)
    assert bad.returncode == 1 and b"--layer 9" in bad.stderr


def model_with_layers(tiny_model_dir, folder, num_layers, contrast_layer=None):
    """A random encoder of ``num_layers`` small layers with the tiny model's tokenizer."""
    import torch

    from infoxlm import EncoderConfig
    from infoxlm.model.hub import record_contrast_layer

    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = EncoderConfig.of_size("tiny", vocab_size=tokenizer.vocab_size, hidden_size=16, intermediate_size=32,
                                  num_hidden_layers=num_layers)
    Encoder(config).save_pretrained(folder, tokenizer)
    if contrast_layer is not None:
        record_contrast_layer(folder, contrast_layer)
    return folder


def test_without_layer_a_12_layer_model_is_scored_at_xtremes_layer_8(tiny_model_dir, tmp_path):
    model = model_with_layers(tiny_model_dir, tmp_path / "twelve", 12)
    write_laser(tmp_path / "data", "deu", TINY_TEXT["de"], TINY_TEXT["en"])
    run = subprocess.run([sys.executable, "-m", "infoxlm", "eval", "tatoeba", "--model", str(model), "--data",
                          str(tmp_path / "data"), "--no-progress", "--output", str(tmp_path / "o.json")],
                         capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["layer"] == 8 and out["layer_rule"].startswith("XTREME")
    assert b"layer 8 (XTREME" in run.stdout


def test_layer_all_names_the_default_layer_and_report_uses_it(tiny_model_dir, tmp_path, capsys):
    from infoxlm.cli import main

    model = model_with_layers(tiny_model_dir, tmp_path / "four", 4, contrast_layer=3)
    write_laser(tmp_path / "data", "deu", TINY_TEXT["de"], TINY_TEXT["en"])
    assert main(["eval", "tatoeba", "--model", str(model), "--data", str(tmp_path / "data"), "--no-progress",
                 "--layer", "all", "--output", str(tmp_path / "all.json")]) == 0
    out = json.loads((tmp_path / "all.json").read_text())
    assert out["layer"] == 3 and "contrast layer" in out["layer_rule"] and set(out["layers"]) == {"0", "1", "2", "3", "4"}
    assert "layer 3 (the contrast layer the model records" in capsys.readouterr().out
    # report: the file's fixed layer, even where another layer scores higher on these (test) data
    out["layers"]["0"]["average"]["xx2en"] = 100.0
    (tmp_path / "all.json").write_text(json.dumps(out))
    assert main(["report", str(tmp_path / "all.json"), "--output", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "all (layer 3, the contrast layer the model records" in md and "(layer 0" not in md
    del out["layer"], out["layer_rule"]  # an older file: the rule for its depth (4 layers: the middle one)
    (tmp_path / "all.json").write_text(json.dumps(out))
    assert main(["report", str(tmp_path / "all.json"), "--output", str(tmp_path / "report")]) == 0
    assert "all (layer 2, the middle layer of 4" in (tmp_path / "report" / "report.md").read_text()


def test_layer_all_prints_every_layers_average_and_the_bars_say_what_they_embed(tiny_model_dir, tmp_path, capsys):
    """The table was the default layer's only, and the progress bars were all called 'embedding'."""
    from infoxlm.cli import main

    model = model_with_layers(tiny_model_dir, tmp_path / "four", 4, contrast_layer=3)
    for code, language in (("deu", "de"), ("rus", "ru")):
        write_laser(tmp_path / "data", code, TINY_TEXT[language], TINY_TEXT["en"])
    assert main(["eval", "tatoeba", "--model", str(model), "--data", str(tmp_path / "data"), "--layer", "all",
                 "--output", str(tmp_path / "all.json")]) == 0
    captured = capsys.readouterr()
    out = json.loads((tmp_path / "all.json").read_text())
    lines = captured.out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("by layer, average top-1 (%)"))
    rows = lines[start + 1 : start + 6]
    assert [row.split()[1] for row in rows] == ["0", "1", "2", "3", "4"]
    for k, row in enumerate(rows):
        average = out["layers"][str(k)]["average"]
        assert f"{average['xx2en']:.1f}" in row and f"{average['en2xx']:.1f}" in row
    assert rows[3].endswith("(the table above)") and rows[0].split()[2] == "(embeddings)"
    # Both files hold the same English: it is embedded once, under its own bar.
    for label in ("deu-eng (1/2): deu", "rus-eng (2/2): rus", "eng (shared)"):
        assert label in captured.err, captured.err
    assert "embedding:" not in captured.err


def test_your_own_pairs_as_a_tsv_or_two_files_score_as_the_laser_layout_does(tiny_model_dir, tatoeba, tmp_path, capsys):
    import json

    from infoxlm.cli import main

    common = ["eval", "tatoeba", "--model", str(tiny_model_dir), "--no-progress", "--device", "cpu"]
    assert main([*common, "--data", str(tatoeba), "--output", str(tmp_path / "laser.json")]) == 0
    de, en = (tatoeba / "tatoeba.deu-eng.deu").read_text(), (tatoeba / "tatoeba.deu-eng.eng").read_text()
    (tmp_path / "pairs.tsv").write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in zip(de.splitlines(), en.splitlines())))
    (tmp_path / "de.txt").write_text(de)
    (tmp_path / "en.txt").write_text(en)
    assert main([*common, "--data", str(tmp_path / "pairs.tsv"), "--langs", "de", "--output", str(tmp_path / "tsv.json")]) == 0
    assert main([*common, "--src", str(tmp_path / "de.txt"), "--tgt", str(tmp_path / "en.txt"), "--output", str(tmp_path / "two.json")]) == 0
    records = "".join(json.dumps({"de": a, "en": b, "id": i}) + "\n" for i, (a, b) in enumerate(zip(de.splitlines(), en.splitlines())))
    (tmp_path / "de.jsonl").write_text(records)  # the fields named as prepare parallel's --src-field / --tgt-field
    assert main([*common, "--data", str(tmp_path / "de.jsonl"), "--output", str(tmp_path / "jsonl.json")]) == 0
    (tmp_path / "pairs.jsonl").write_text(records.replace('"de":', '"text_de":').replace('"en":', '"text_en":'))
    assert main([*common, "--data", str(tmp_path / "pairs.jsonl"), "--langs", "de", "--src-field", "text_de",
                 "--tgt-field", "text_en", "--output", str(tmp_path / "fields.json")]) == 0  # fmt: skip
    scores = [json.loads((tmp_path / f"{name}.json").read_text())["languages"] for name in ("laser", "tsv", "two", "jsonl", "fields")]
    assert all(score == scores[0] for score in scores) and set(scores[0]) == {"deu"}  # the header row is no pair
    capsys.readouterr()
    for argv, message in [
        (["--data", str(tmp_path / "tatoeb")], f"{tmp_path / 'tatoeb'}: no such file or directory; expected a directory of LASER"),
        (["--data", str(tmp_path / "pairs.tsv")], "pairs: not a language code; name the pairs' language with --langs"),
        (["--src", str(tmp_path / "de.txt")], "give --data, or --src and --tgt"),
        (["--src", str(tmp_path / "de.txt"), "--tgt", str(tmp_path / "nope.txt")], f"{tmp_path / 'nope.txt'}: missing"),
        (["--data", str(tmp_path / "pairs.jsonl"), "--langs", "de"], "'de'"),  # no such field: named
    ]:
        assert main([*common, *argv, "--output", str(tmp_path / "x.json")]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
