"""Language codes: which codes name a language, their canonical spelling, and language pairs.

A corpus is named by a BCP 47-style tag: an ISO 639 code, optionally followed by a script
(``zh-Hans``, ``sr-Latn``), a region (``pt-BR``, ``es-419``) and/or variants. The ISO 639
part must be known:

* every ISO 639-1 two-letter code (plus ``sh``, Serbo-Croatian, still common in corpora);
* the ISO 639-3 code of each of those languages (``deu``, ``zho``) and ISO 639-2/B variants
  (``ger``, ``chi``), which are spelled with the two-letter code, as BCP 47 asks
  (``deu`` -> ``de``), so that one language never ends up in two corpora;
* further ISO 639-3 codes for languages without a two-letter code: every language of
  XTREME's Tatoeba retrieval task (``cmn``, ``yue``, ``kab`` …, some of them retired or
  collective codes that Tatoeba still uses: ``ber``, ``kzj``), of FLORES-200 and of CC-100 /
  XLM-R that has no ISO 639-1 code (CC-100's ``ns`` is ``nso``), and a few more.

The tables are package data (``iso_639.tsv`` beside this module) rather than taken from a
package: no installed package carries ISO 639, and a few hundred lines of text are cheaper
than a dependency.

Canonical spelling: language lower case, script title case, region upper case, ``-`` as the
separator (``ZH_hans`` -> ``zh-Hans``).

>>> canonical_language("pt_br"), canonical_language("deu"), canonical_language("zh-hant")
('pt-BR', 'de', 'zh-Hant')
>>> parse_language_pair("en-zh-Hans")
('en', 'zh-Hans')
"""

from __future__ import annotations

import re
from importlib import resources

from infoxlm.errors import DataError

__all__ = [
    "ISO_639_1",
    "ISO_639_3",
    "canonical_language",
    "is_english",
    "language_name",
    "parse_language_pair",
]

# iso_639.tsv, beside this module: one language per row, ISO 639-1 code (empty for a language
# without one: Tatoeba (XTREME), FLORES-200, CC-100 and a few other languages common in
# multilingual corpora), ISO 639-3 (= 639-2/T) code, English name.
ISO_639_FILE = "iso_639.tsv"

# Spellings that name a language with a two-letter code: ISO 639-2/B codes and ISO 639-1
# codes that were withdrawn in favour of others.
_ALIASES = {
    "alb": "sq", "arm": "hy", "baq": "eu", "bur": "my", "chi": "zh", "cze": "cs", "dut": "nl",
    "fre": "fr", "geo": "ka", "ger": "de", "gre": "el", "ice": "is", "mac": "mk", "mao": "mi",
    "may": "ms", "per": "fa", "rum": "ro", "slo": "sk", "tib": "bo", "wel": "cy",
    "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro",
}  # fmt: skip


def _read_tables() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(ISO 639-1 → name, ISO 639-3 → name, any code → its two-letter spelling) from the package's
    ISO_639_FILE (read with importlib.resources, so it is found in a wheel or a zip too)."""
    two_letter: dict[str, str] = {}
    three_letter: dict[str, str] = {}
    to_two_letter = dict(_ALIASES)
    text = resources.files(__package__).joinpath(ISO_639_FILE).read_text(encoding="utf-8")
    for row in text.splitlines()[1:]:  # the first row is the header
        code, code3, name = row.split("\t")
        three_letter[code3] = name
        if code:
            two_letter[code] = name
            to_two_letter[code3] = code
    return two_letter, three_letter, to_two_letter


#: ISO 639-1 code -> English name (184 codes).
ISO_639_1: dict[str, str]
#: ISO 639-3 code -> English name: the languages of ISO_639_1 and those without a two-letter code.
ISO_639_3: dict[str, str]
ISO_639_1, ISO_639_3, _TO_TWO_LETTER = _read_tables()

# language[-script][-region][-variant...], "-" or "_" between subtags.
_SUBTAG_SPLIT = re.compile(r"[-_]")
_SCRIPT = re.compile(r"^[A-Za-z]{4}$")
_REGION = re.compile(r"^(?:[A-Za-z]{2}|[0-9]{3})$")
_VARIANT = re.compile(r"^(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3})$")


def _canonical_or_reason(code: str, strict_case: bool = False) -> tuple[str | None, str]:
    """``(canonical tag, "")`` or ``(None, why it is not a language tag)``.

    ``strict_case`` accepts only the canonical case (used to tell ``en-pt-BR`` apart).
    """
    if not isinstance(code, str) or not code:
        return None, "it is empty"
    primary, *subtags = _SUBTAG_SPLIT.split(code)
    if strict_case and primary != primary.lower():
        return None, "not in canonical case"
    primary = primary.lower()
    primary = _TO_TWO_LETTER.get(primary, primary)
    if primary not in ISO_639_1 and primary not in ISO_639_3:
        return None, f"{primary!r} is not an ISO 639-1 or ISO 639-3 language code"
    parts = [primary]
    stage = 0  # BCP 47 order: 0 = a script may come, 1 = a region may come, 2 = variants only
    for subtag in subtags:
        if stage == 0 and _SCRIPT.match(subtag):
            canonical, stage = subtag.title(), 1
        elif stage <= 1 and _REGION.match(subtag):
            canonical, stage = subtag.upper(), 2
        elif _VARIANT.match(subtag):
            canonical, stage = subtag.lower(), 2
        else:
            return None, f"{subtag!r} is not a script (Hans), region (BR, 419) or variant subtag here"
        if strict_case and subtag != canonical:
            return None, "not in canonical case"
        parts.append(canonical)
    return "-".join(parts), ""


def canonical_language(code: str) -> str:
    """The canonical spelling of a language tag; raises :class:`DataError` if it names none.

    ``de``, ``DE``, ``deu`` and ``ger`` all give ``de``; ``zh_hans`` gives ``zh-Hans``.
    """
    canonical, reason = _canonical_or_reason(code)
    if canonical is None:
        raise DataError(
            f"language {code!r} is not known: {reason}; expected an ISO 639 code such as de, fil or zh-Hans"
        )
    return canonical


def language_name(code: str) -> str:
    """English name of a (canonical) tag's language: ``language_name("pt-BR") == "Portuguese"``."""
    primary = canonical_language(code).split("-", 1)[0]
    return ISO_639_1.get(primary) or ISO_639_3[primary]


def is_english(code: str) -> bool:
    """Whether a tag names English (``en``, ``eng``, ``en-GB`` …)."""
    return canonical_language(code).split("-", 1)[0] == "en"


def parse_language_pair(pair: str, allow_non_english: bool = False) -> tuple[str, str]:
    """Split ``"xx-yy"`` into two canonical tags; one must be English unless allowed otherwise.

    Tags with subtags are split where both halves are language tags: ``en-zh-Hans`` ->
    ``("en", "zh-Hans")``, ``pt-BR-en`` -> ``("pt-BR", "en")``. When case does not decide
    (``en-pt-br`` could be ``en`` + ``pt-br`` or ``en-pt`` + ``br``, Breton) the pair is
    refused with a request to write the region in upper case.

    Raises:
        DataError: not two language tags, the same language twice, or (unless
            ``allow_non_english``) no English side: InfoXLM's parallel data pivots on English.
    """
    pieces = pair.split("-") if isinstance(pair, str) else []
    splits = [("-".join(pieces[:i]), "-".join(pieces[i:])) for i in range(1, len(pieces))]
    found: list[tuple[str, str]] = []
    for strict in (True, False):  # canonical case first: it removes the ambiguity above
        found = []
        for left, right in splits:
            a, _ = _canonical_or_reason(left, strict)
            b, _ = _canonical_or_reason(right, strict)
            if a and b:
                found.append((a, b))
        if found:
            break
    if not found:
        raise DataError(
            f"language pair {pair!r} is not two known language codes joined by '-'; "
            "expected e.g. en-de or en-zh-Hans"
        )
    if len(found) > 1:
        readings = " or ".join(f"{a} + {b}" for a, b in found)
        raise DataError(
            f"language pair {pair!r} is ambiguous ({readings}); write regions in upper case, e.g. en-pt-BR"
        )
    src, tgt = found[0]
    if src == tgt:
        raise DataError(f"language pair {pair!r} names the same language twice; expected two languages")
    if not allow_non_english and not (is_english(src) or is_english(tgt)):
        raise DataError(
            f"language pair {pair!r} has no English side; InfoXLM's parallel data pairs English "
            "with another language (en-xx); pass --allow-non-english-pair to use it anyway"
        )
    return src, tgt
