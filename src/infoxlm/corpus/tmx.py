"""Reading translation pairs from a TMX file (Translation Memory eXchange), plain or compressed.

Every ``<tu>`` (translation unit) gives one pair: the ``<seg>`` of its first ``<tuv>`` whose
``xml:lang`` (or TMX 1.1 ``lang``) matches the source language, and that of the first one
matching the target language. Tags match case-insensitively by primary language subtag, three-
letter codes as their two-letter ones: ``en-US``, ``EN`` and ``eng`` all match ``en``. A unit
lacking one of the languages gives a pair with that side empty, which ``prepare`` skips and
counts as empty, as it does a pair with an empty side in any format.

A segment's text is its text and that of ``<hi>`` and ``<sub>`` inside it; the native codes
inside ``<bpt>``, ``<ept>``, ``<it>``, ``<ph>`` and ``<ut>`` (such as ``<b>``) are left out.
The file is parsed with ``xml.etree.ElementTree.iterparse`` and every finished unit is
dropped from the tree, so memory stays flat whatever the file size.

Example::

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "en-de.tmx"
    >>> _ = path.write_text('<tmx version="1.4"><header/><body><tu>'
    ...     '<tuv xml:lang="en-US"><seg>The <bpt i="1">&lt;b&gt;</bpt>cat<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>'
    ...     '<tuv xml:lang="DE"><seg>Die Katze.</seg></tuv></tu></body></tmx>')
    >>> [(block.src, block.tgt) for block in read_tmx_pairs(path, "en", "de")]
    [(['The cat.'], ['Die Katze.'])]
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from infoxlm.corpus.languages import canonical_language
from infoxlm.corpus.parallel_text import PairBlock
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES, open_counted, read_error, read_errors
from infoxlm.errors import DataError

__all__ = ["read_tmx_pairs"]

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_CODE_TAGS = frozenset({"bpt", "ept", "it", "ph", "ut"})  # inline native codes, not text


def primary_language(tag: str) -> str:
    """``"en"`` for ``en``, ``EN-us``, ``en_US`` and ``eng``; a tag unknown to the language
    table keeps its own lower-cased first subtag."""
    first = tag.strip().replace("_", "-").split("-")[0].lower()
    try:
        return canonical_language(first).split("-")[0].lower()
    except DataError:
        return first


def read_tmx_pairs(
    path: Path, src_language: str, tgt_language: str, block_bytes: int = DEFAULT_BLOCK_BYTES
) -> Iterator[PairBlock]:
    """Stream the pairs of a TMX file as :class:`PairBlock` s of about ``block_bytes`` characters.

    Raises:
        DataError: malformed XML (``FILE:LINE: malformed XML (…)``), a missing, damaged or
            truncated file.
    """
    path = Path(path)
    wanted = (primary_language(src_language), primary_language(tgt_language))
    languages: dict[str, str] = {}  # xml:lang as written -> primary language, cached
    units = paired = texted = coded = 0  # units read; holding both languages; with text in both; codes for text
    raw, stream = open_counted(path)
    try:
        with raw, stream:
            src: list[str | None] = []
            tgt: list[str | None] = []
            chars = reported = 0
            parents: list[ET.Element] = []  # the open elements, outermost first
            for event, element in ET.iterparse(stream, events=("start", "end")):
                if event == "start":
                    parents.append(element)
                    continue
                parents.pop()
                if _local(element.tag) != "tu":
                    continue
                *pair, codes_only = _unit_pair(element, wanted, languages)
                units += 1
                paired += None not in pair
                texted += bool(pair[0] and pair[1] and pair[0].strip() and pair[1].strip())
                coded += codes_only and None not in pair
                # A side the unit lacks is empty: prepare skips the pair and counts it.
                src.append(pair[0] or "")
                tgt.append(pair[1] or "")
                chars += len(src[-1]) + len(tgt[-1])
                element.clear()
                if parents:
                    parents[-1].remove(element)  # a finished unit leaves the tree
                if chars >= block_bytes:
                    position = raw.tell()
                    yield PairBlock(src, tgt, position - reported)
                    src, tgt, chars, reported = [], [], 0, position
            if not paired:
                raise DataError(_no_pair(path, units, wanted, languages))
            if not texted:
                raise DataError(_no_text(path, paired, coded, wanted))
            yield PairBlock(src, tgt, raw.tell() - reported)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        message = str(exc).split(": line ")[0]
        where = f"{path}:{line}" if line else str(path)
        raise DataError(f"{where}: malformed XML ({message}); expected a TMX file") from None
    except read_errors() as exc:
        raise read_error(path, exc) from None


def _local(tag: str) -> str:
    """A tag without its namespace: ``{ns}tu`` -> ``tu``."""
    return tag.rsplit("}", 1)[-1]


def _no_pair(path: Path, units: int, wanted: tuple[str, str], languages: dict[str, str]) -> str:
    """Why a TMX file gave no pair: no unit, or none holding both languages."""
    expected = f"expected a TMX file whose units hold {wanted[0]} and {wanted[1]} segments"
    if not units:
        return f"{path}: no translation unit (<tu>); {expected}"
    tags = sorted(tag or "(no xml:lang)" for tag in languages)
    shown = ", ".join(tags[:8]) + (f" (+{len(tags) - 8} more)" if len(tags) > 8 else "")
    return f"{path}: no unit holds both {wanted[0]} and {wanted[1]}; its units hold {shown}; {expected}"


def _no_text(path: Path, paired: int, coded: int, wanted: tuple[str, str]) -> str:
    """Why units holding both languages gave no pair: a side of each is blank, or holds only
    inline codes (markup such as ``<b>``, which is not text)."""
    src, tgt = wanted
    codes = f"only inline codes ({', '.join(f'<{tag}>' for tag in sorted(_CODE_TAGS))}: native markup, not text)"
    units = "1 unit" if paired == 1 else f"{paired:,} units"
    if coded == paired:
        why = f"every unit holding both ({units}) has one that holds {codes}"
    elif coded:
        why = f"{coded:,} of the {units} holding both {'has' if coded == 1 else 'have'} one that holds {codes}, the others a blank one"
    else:
        why = f"every unit holding both ({units}) has a blank one"
    return f"{path}: no unit has text in both its {src} and {tgt} segments: {why}; expected segments with text"


def _unit_pair(
    unit: ET.Element, wanted: tuple[str, str], languages: dict[str, str]
) -> tuple[str | None, str | None, bool]:
    """The (source, target) segments of one ``<tu>`` (None for a language it lacks), and
    whether a blank one of them holds inline codes in place of text."""
    sides: list[str | None] = [None, None]
    codes_only = False
    for variant in unit:
        if _local(variant.tag) != "tuv":
            continue
        tag = variant.get(_XML_LANG) or variant.get("lang") or ""
        if tag not in languages:
            languages[tag] = primary_language(tag) if tag else ""
        for side in (0, 1):
            if sides[side] is None and languages[tag] == wanted[side]:
                segment = next((child for child in variant if _local(child.tag) == "seg"), None)
                sides[side] = _segment_text(segment) if segment is not None else ""
                if segment is not None and not sides[side].strip():  # rare: looked into only then
                    codes_only |= any(_local(e.tag) in _CODE_TAGS for e in segment.iter())
                break
    # XML keeps line breaks inside a segment; a side is one line of text.
    src, tgt = (side.replace("\n", " ") if side is not None else None for side in sides)
    return src, tgt, codes_only


def _segment_text(element: ET.Element) -> str:
    """The text of a ``<seg>`` (or ``<hi>``, ``<sub>``), native codes left out."""
    parts = [element.text or ""]
    for child in element:
        if _local(child.tag) not in _CODE_TAGS:
            parts.append(_segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)
