"""Tests for infoxlm.corpus.languages: known codes, canonical spelling, English-pivot pairs."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path

import pytest

from infoxlm.corpus import languages
from infoxlm.corpus.languages import (
    ISO_639_1,
    ISO_639_3,
    canonical_language,
    is_english,
    language_name,
    parse_language_pair,
)
from infoxlm.errors import DataError

# The 100 languages of CC-100 / XLM-R, spelled as ISO codes (CC-100's "ns" is nso; its
# romanised variants like hi_rom are hi-Latn).
CC100 = (
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa ff fi fr fy ga gd gl gn "
    "gu ha he hi hr ht hu hy id ig is it ja jv ka kk km kn ko ku ky la lg li ln lo lt lv mg mk "
    "ml mn mr ms my ne nl no nso om or pa pl ps pt qu rm ro ru sa sc sd si sk sl so sq sr ss su "
    "sv sw ta te th tl tn tr ug uk ur uz vi wo xh yi yo zh-Hans zh-Hant zu hi-Latn bn-Latn ur-Latn"
).split()
# The 112 languages of XTREME's Tatoeba retrieval task, as its file names spell them.
TATOEBA = (
    "afr amh ang ara arq arz ast awa aze bel ben ber bos bre bul cat cbk ceb ces cha cmn cor csb "
    "cym dan deu dsb dtp ell epo est eus fao fin fra fry gla gle glg gsw heb hin hrv hsb hun hye "
    "ido ile ina ind isl ita jav jpn kab kat kaz khm kor kur kzj lat lfn lit lvs mal mar max mhr "
    "mkd mon nds nld nno nob nov oci orv pam pes pms pol por ron rus slk slv spa sqi srp swe swg "
    "swh tam tat tel tgl tha tuk tur tzl uig ukr urd uzb vie war wuu xho yid yue zsm"
).split()


def test_tables_are_complete():
    assert len(ISO_639_1) == 184  # the 183 current codes plus sh (Serbo-Croatian)
    assert all(len(code) == 2 and code.islower() for code in ISO_639_1)
    assert all(len(code) == 3 and code.islower() for code in ISO_639_3)
    assert len(TATOEBA) == 112 and len(set(CC100)) == len(CC100)
    for code in CC100 + TATOEBA:
        canonical_language(code)  # raises if unknown


def test_the_tables_read_from_package_data_are_the_ones_written_in_code_before():
    # The SHA-256 of the three tables as languages.py built them from its own text, before
    # they moved to iso_639.tsv: 184 two-letter codes, 315 three-letter, 209 spellings.
    tables = [ISO_639_1, ISO_639_3, languages._TO_TWO_LETTER]
    digest = hashlib.sha256(json.dumps(tables, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert [len(t) for t in tables] == [184, 315, 209]
    assert digest == "7c7a7084ee8e6ff59120e2f323d8a671e6ecd1d40b2d26aeab488757f4e39bbe"
    assert (ISO_639_1["de"], ISO_639_3["deu"], ISO_639_3["yue"], canonical_language("ger")) == (
        "German", "German", "Cantonese", "de")


def test_a_wheel_ships_the_tables():
    # setuptools puts into a wheel the non-Python files that [tool.setuptools.package-data] names.
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["infoxlm"]
    assert any(fnmatch.fnmatch(f"corpus/{languages.ISO_639_FILE}", pattern) for pattern in globs)


@pytest.mark.parametrize(
    "code, canonical",
    [
        ("de", "de"),
        ("DE", "de"),
        ("deu", "de"),  # ISO 639-3 of a language with a two-letter code
        ("ger", "de"),  # ISO 639-2/B
        ("iw", "he"),  # withdrawn ISO 639-1
        ("fil", "fil"),
        ("cmn", "cmn"),
        ("zh-hans", "zh-Hans"),
        ("ZH_HANT", "zh-Hant"),
        ("pt_br", "pt-BR"),
        ("es-419", "es-419"),
        ("sr-Latn-RS", "sr-Latn-RS"),
        ("en-GB-oxendict", "en-GB-oxendict"),
    ],
)
def test_canonical_spelling(code, canonical):
    assert canonical_language(code) == canonical


@pytest.mark.parametrize(
    "code, message",
    [
        ("xx", "'xx' is not an ISO 639-1 or ISO 639-3"),
        ("english", "'english' is not an ISO 639-1 or ISO 639-3"),
        ("", "it is empty"),
        ("de-Latn-Hans", "'Hans' is not a script"),
        ("de-x", "'x' is not a script"),
    ],
)
def test_unknown_codes_are_refused(code, message):
    with pytest.raises(DataError, match=message):
        canonical_language(code)


def test_names_and_english():
    assert language_name("pt-BR") == "Portuguese" and language_name("yue") == "Cantonese"
    assert is_english("en") and is_english("eng") and is_english("en-GB") and not is_english("de")


@pytest.mark.parametrize(
    "pair, expected",
    [
        ("en-de", ("en", "de")),
        ("de-en", ("de", "en")),
        ("EN-DE", ("en", "de")),
        ("en-zh-Hans", ("en", "zh-Hans")),
        ("pt-BR-en", ("pt-BR", "en")),
        ("en-pt-BR", ("en", "pt-BR")),
        ("eng-deu", ("en", "de")),
        ("en-sw_KE", ("en", "sw-KE")),
    ],
)
def test_pairs(pair, expected):
    assert parse_language_pair(pair) == expected


def test_bad_pairs():
    with pytest.raises(DataError, match="has no English side.*--allow-non-english-pair"):
        parse_language_pair("de-fr")
    assert parse_language_pair("de-fr", allow_non_english=True) == ("de", "fr")
    with pytest.raises(DataError, match="ambiguous.*upper case"):
        parse_language_pair("en-pt-br")  # en + pt-br, or en-pt + br (Breton)?
    with pytest.raises(DataError, match="same language twice"):
        parse_language_pair("en-eng")
    for bad in ("en", "en-", "en-xx", "en_de", ""):
        with pytest.raises(DataError, match="not two known language codes"):
            parse_language_pair(bad)
