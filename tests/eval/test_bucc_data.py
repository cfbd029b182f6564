"""The BUCC 2018 files: both layouts, and every malformed file named with its line."""

from __future__ import annotations

import pytest

from infoxlm.cli import main
from infoxlm.eval.bucc_data import default_tune_on, find_pairs, find_splits, load_bucc, read_side
from infoxlm.errors import EvalDataError

from mining_files import write_bucc, write_bucc_set, write_side


def test_the_shipped_layout_and_xtremes_are_both_found(tmp_path):
    shipped = tmp_path / "bucc2018"
    write_bucc(shipped / "de-en", "de", "training", n=10, hidden=3)
    write_bucc(shipped / "de-en", "de", "sample", n=10, hidden=3)
    write_bucc(shipped / "zh-en", "zh", "test", n=10, hidden=3, gold=False)
    assert find_pairs(shipped) == ["de-en", "zh-en"]
    assert find_splits(shipped, "de-en") == ["sample", "training"]
    assert default_tune_on(shipped, None) == "sample"
    xtreme = tmp_path / "xtreme"
    write_bucc(xtreme, "fr", "test", n=10, hidden=3, gold=False)
    write_bucc(xtreme, "fr", "dev", n=10, hidden=3)
    assert find_splits(xtreme, "fr-en") == ["dev", "test"] and default_tune_on(xtreme, ["fr"]) == "dev"
    splits = load_bucc(xtreme, ["fr-en"], None, "dev")
    assert [(s.pair, s.name, s.gold is None) for s in splits] == [("fr-en", "dev", False), ("fr-en", "test", True)]
    dev = splits[0]
    assert len(dev.src.ids) == 10 and dev.src.ids[0] == "fr-00000000" and len(dev.gold) == 3
    assert all(s in dev.src.ids and t in dev.trg.ids for s, t in dev.gold)


def test_a_sentence_is_the_text_after_the_tab_as_it_is(tmp_path):
    path = write_side(tmp_path / "de-en.sample.de", ["de-1", "de-2"], [" Hallo  Welt ", "Ja."])
    side = read_side(path)
    assert side.ids == ["de-1", "de-2"] and side.texts == [" Hallo  Welt ", "Ja."]


# (what the file holds, the error): each a bad input of the issue, in the official layout.
BAD_SIDES = [
    (b"de-1\tHallo\nde-2\n", r"de-en.sample.de:2: 1 tab-separated column; expected 2 columns, id<TAB>sentence"),
    (b"de-1\tHallo\tWelt\n", r"de-en.sample.de:1: 3 tab-separated columns; expected 2 columns, id<TAB>sentence"),
    (b"de-1\tHallo\n\nde-2\tJa\n", r"de-en.sample.de:2: a blank line; expected 2 columns, id<TAB>sentence"),
    (b"de-1\tHallo\nde-2\tJa\nde-1\tNein\n", r"de-en.sample.de:3: id 'de-1' appears twice \(first on line 1\); expected unique ids"),
    (b"", r"de-en.sample.de: empty; expected lines id<TAB>sentence"),
    (b"de-1\tHallo\nde-2\tGr\xfc\xdfe\n", r"de-en.sample.de:2: invalid UTF-8"),
]


@pytest.mark.parametrize(("content", "message"), BAD_SIDES, ids=["missing", "extra", "blank", "twice", "empty", "utf8"])
def test_a_malformed_side_is_named_with_its_line(tmp_path, content, message):
    write_bucc(tmp_path, "de", "sample", n=5, hidden=2)
    (tmp_path / "de-en.sample.de").write_bytes(content)
    with pytest.raises(EvalDataError, match=message):
        load_bucc(tmp_path, ["de-en"], None, "sample")


@pytest.mark.parametrize(("line", "message"), [
    (b"de-00000001\ten-00009999\n", r"de-en.sample.gold:2: id 'en-00009999' is not in .*de-en.sample.en; expected ids"),
    (b"de-77\ten-00000001\n", r"de-en.sample.gold:2: id 'de-77' is not in .*de-en.sample.de; expected ids"),
    (b"de-00000001 en-00000001\n", r"de-en.sample.gold:2: 1 tab-separated column; expected 2 columns, xx-id<TAB>en-id"),
])
def test_a_gold_line_naming_an_unknown_id_or_malformed_is_named(tmp_path, line, message):
    write_bucc(tmp_path, "de", "sample", n=5, hidden=2)
    gold = tmp_path / "de-en.sample.gold"
    gold.write_bytes(gold.read_bytes().split(b"\n")[0] + b"\n" + line)
    with pytest.raises(EvalDataError, match=message):
        load_bucc(tmp_path, ["de-en"], None, "sample")


def test_a_tuning_split_without_gold_a_missing_split_and_a_bad_pair_are_refused(tmp_path):
    write_bucc(tmp_path, "de", "sample", n=5, hidden=2)
    write_bucc(tmp_path, "de", "test", n=5, hidden=2, gold=False)
    with pytest.raises(EvalDataError, match=r"de-en.test.gold: missing; --tune-on test needs the gold pairs .*: sample\)"):
        load_bucc(tmp_path, None, None, "test")
    with pytest.raises(EvalDataError, match=r"de-en.training.en: missing; de-en has the splits sample, test"):
        load_bucc(tmp_path, None, None, "training")
    with pytest.raises(EvalDataError, match=r"fr-en.SPLIT.en: no such files; expected the BUCC files of fr-en"):
        load_bucc(tmp_path, ["fr-en"], None, "sample")
    with pytest.raises(EvalDataError, match=r"BUCC pair 'en-de': expected xx-en"):
        load_bucc(tmp_path, ["en-de"], None, "sample")
    with pytest.raises(EvalDataError, match=r"de-en.sample.gold: not a directory; expected the BUCC 2018 files"):
        load_bucc(tmp_path / "de-en.sample.gold", None, None, "sample")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvalDataError, match=r"empty: no BUCC files \(xx-en.SPLIT.en\)"):
        load_bucc(tmp_path / "empty", None, None, "sample")


def test_the_command_says_one_line_and_writes_nothing(tiny_model_dir, tmp_path, capsys):
    data = write_bucc_set(tmp_path / "bucc2018", languages=("de",), n=6, hidden=2)
    (data / "de-en.test.en").write_bytes(b"en-1\tHello\nen-1\tAgain\n")
    out = tmp_path / "out" / "b.json"
    code = main(["eval", "bucc", "--model", str(tiny_model_dir), "--data", str(data), "--tune-on", "training",
                 "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == f"infoxlm: error: {data / 'de-en.test.en'}:2: id 'en-1' appears twice (first on line 1); expected unique ids"
    assert not (tmp_path / "out").exists() and not (tmp_path / "out" / "b-predictions").exists()


def test_prediction_files_are_not_written_into_the_data(tiny_model_dir, tmp_path, capsys):
    data = write_bucc_set(tmp_path / "bucc2018", languages=("de",), n=6, hidden=2)
    code = main(["eval", "bucc", "--model", str(tiny_model_dir), "--data", str(data), "--tune-on", "training",
                 "--predictions", str(data / "predictions"), "--output", str(tmp_path / "b.json"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == f"infoxlm: error: {data / 'predictions'}: is inside the BUCC data folder {data}; write outside it"
