"""PAN-X / UD-POS files in XTREME's processed layout and in CoNLL-U; where each split is found."""

from __future__ import annotations

import pytest

from infoxlm.errors import EvalDataError
from infoxlm.eval.tagging_data import PANX_LABELS, UDPOS_LABELS, find_split, read_conllu, read_tagged

CONLLU = (
    "# sent_id = 1\n# text = Im Haus.\n"
    "1-2\tIm\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tIn\tin\tADP\t_\t_\t3\tcase\t_\t_\n"
    "2\tdem\tder\tDET\t_\t_\t3\tdet\t_\t_\n"
    "3\tHaus\tHaus\tNOUN\t_\t_\t0\troot\t_\t_\n"
    "3.1\tx\tx\tX\t_\t_\t_\t_\t_\t_\n"
    "4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_\n\n"
)


def test_processed_files_give_sentences_and_drop_the_language_prefix(tmp_path):
    f = tmp_path / "train"
    f.write_text("-DOCSTART-\tO\n\nde:Angela\tB-PER\nde:Merkel\tI-PER\n\n\nde:in\tO\n", encoding="utf-8")
    sentences = read_tagged(f, PANX_LABELS, lang="de")
    assert [s.words for s in sentences] == [("Angela", "Merkel"), ("in",)]
    assert sentences[0].labels == ("B-PER", "I-PER") and sentences[1].where == f"{f}:7"


def test_conllu_reads_syntactic_words_and_upos(tmp_path):
    f = tmp_path / "de_gsd-ud-test.conllu"
    f.write_text(CONLLU, encoding="utf-8")
    (s,) = read_conllu(f)
    assert s.words == ("In", "dem", "Haus", ".") and s.labels == ("ADP", "DET", "NOUN", "PUNCT")


@pytest.mark.parametrize("text, message", [
    ("Angela\tB-PER\tx\n", r"train:1: 3 tab-separated field\(s\) .*expected 2: word<TAB>label"),
    ("Angela\n", r"train:1: 1 tab-separated field\(s\)"),
    ("Angela\tB-PER\n\nMerkel\tB-PERSON\n", r"train:3: label 'B-PERSON' is not in the task's label set; expected one of O B-PER"),
    ("\n\n", r"train: no sentences"),
])
def test_bad_processed_files_name_file_line_and_value(tmp_path, text, message):
    (tmp_path / "train").write_text(text, encoding="utf-8")
    with pytest.raises(EvalDataError, match=message):
        read_tagged(tmp_path / "train", PANX_LABELS)


def test_bad_conllu_names_file_line_and_value(tmp_path):
    (tmp_path / "a.conllu").write_text("1\tHaus\tHaus\tNOUN\t_\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"a.conllu:1: 5 tab-separated field\(s\); expected CoNLL-U's 10"):
        read_conllu(tmp_path / "a.conllu")
    (tmp_path / "b.conllu").write_text("1\tHaus\tHaus\tNN\t_\t_\t0\troot\t_\t_\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"b.conllu:1: label 'NN' is not in the task's label set"):
        read_conllu(tmp_path / "b.conllu", UDPOS_LABELS)


def test_find_split_knows_xtremes_layouts(tmp_path):
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "train").write_text("a\tO\n")
    (tmp_path / "en" / "dev.xlm-roberta-base").write_text("a\tO\n")
    (tmp_path / "test-en.tsv").write_text("a\tO\n")
    (tmp_path / "de").mkdir()
    (tmp_path / "de" / "de_gsd-ud-test.conllu").write_text(CONLLU)
    assert find_split(tmp_path, "en", "train") == tmp_path / "en" / "train"
    assert find_split(tmp_path, "en", "dev") == tmp_path / "en" / "dev.xlm-roberta-base"
    assert find_split(tmp_path, "en", "test") == tmp_path / "test-en.tsv"
    assert find_split(tmp_path, "de", "test") is None
    assert find_split(tmp_path, "de", "test", conllu=True) == tmp_path / "de" / "de_gsd-ud-test.conllu"
