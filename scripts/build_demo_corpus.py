#!/usr/bin/env python3
"""Build the demo corpus shipped in ``src/infoxlm/demo/corpus`` from real translations.

The corpus is made end to end from packages that a machine with only package-registry
access can fetch (see the corpus README for what comes out):

=================  =======================================  =========  ==================
source             package(s)                               licence    used for
=================  =======================================  =========  ==================
LibreOffice help   libreoffice-help-en-us + -help-XX (apt)  MPL-2.0    train, dev, test,
                                                                       classification
LibreOffice UI     libreoffice-l10n-XX (apt, gettext .mo)   MPL-2.0    train, dev, test
Django             django (PyPI wheel, gettext .mo)         BSD-3      train, dev, test
Firefox ESR        firefox-esr + firefox-esr-l10n-XX (apt)  MPL-2.0    heldout test only
=================  =======================================  =========  ==================

Steps: download (``apt-get download``, ``pip download --no-deps``) -> unpack (``dpkg -x``,
zip) -> align (help paragraphs by their ``id`` within the same file; gettext msgid ->
msgstr; Firefox entries by file and key) -> clean (markup stripped, entities decoded,
mnemonics removed, brand variables filled in, anything with a remaining placeholder
dropped, NFC) -> deduplicate (normalised text, both sides) -> split with no overlap
(normalised text, both sides, across all languages for English) -> write gzip files.

Firefox is never used for training, dev or test: its sentences form the ``heldout``
retrieval test set, a check on text from a source family the demo never saw.

Run it (Debian/Ubuntu with apt, as root or with write access to the work dir)::

    python scripts/build_demo_corpus.py --work-dir /tmp/demo-corpus-work

It takes a few minutes (about 130 MB of downloads). The output is a function of the seed
and the package versions; ``--versions-from src/infoxlm/demo/corpus/manifest.json`` asks
for exactly the versions a previous build used (apt can only fetch versions the archive
still carries).
"""

from __future__ import annotations

import argparse
import gettext
import gzip
import hashlib
import html
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import unicodedata
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

# ------------------------------------------------------------------------------------------
# Languages
# ------------------------------------------------------------------------------------------

# The 14 non-English languages of the InfoXLM paper's XNLI / Tatoeba tables.
LANGUAGES = ["ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"]
# Tatoeba (LASER / XTREME) file names use these ISO 639-3 codes.
TATOEBA_CODES = {
    "ar": "ara", "bg": "bul", "de": "deu", "el": "ell", "es": "spa", "fr": "fra", "hi": "hin",
    "ru": "rus", "sw": "swh", "th": "tha", "tr": "tur", "ur": "urd", "vi": "vie", "zh": "cmn",
}
# Languages written in a non-Latin script: a translation that is mostly ASCII letters there
# was left untranslated.
NON_LATIN = {"ar", "bg", "el", "hi", "ru", "th", "ur", "zh"}
# Package-name suffixes per source; a language missing from a table has no package there
# (checked against Debian 12: no LibreOffice help for ar bg th sw ur, no LibreOffice or
# Firefox translation for sw, no LibreOffice translation for ur).
HELP_PACKAGES = {l: l for l in ["de", "el", "es", "fr", "hi", "ru", "tr", "vi"]} | {"zh": "zh-cn"}
L10N_PACKAGES = {l: l for l in ["ar", "bg", "de", "el", "es", "fr", "hi", "ru", "th", "tr", "vi"]} | {
    "zh": "zh-cn"
}
FIREFOX_PACKAGES = {l: l for l in ["ar", "bg", "de", "el", "fr", "ru", "th", "tr", "ur", "vi"]} | {
    "es": "es-es", "hi": "hi-in", "zh": "zh-cn",
}
DJANGO_LOCALES = {l: l for l in LANGUAGES} | {"zh": "zh_Hans"}
DJANGO_DEFAULT_VERSION = "5.2.19"

# Help module (directory under text/) -> classification label.
HELP_LABELS = {
    "swriter": "writer", "scalc": "calc", "simpress": "impress", "sdraw": "draw",
    "sdatabase": "base", "smath": "math", "schart": "chart", "sbasic": "basic",
}

# ------------------------------------------------------------------------------------------
# Text cleaning
# ------------------------------------------------------------------------------------------

_KEEP_FORMAT = {"\u200c", "\u200d"}  # ZWNJ / ZWJ carry meaning in Persian-script and Indic text
_WS = re.compile(r"\s+")
_TAG = re.compile(r"<[^<>]{1,200}>")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
# Placeholders left in a string after the brand variables are filled in: printf (%s, %1$s,
# %(name)s, %1, %S), LibreOffice ($(ARG1), $1, $name$, %NAME, #1), Python/Fluent ({0},
# { $count }), and anything in braces.
_PLACEHOLDER = re.compile(
    r"%(\([^)]*\))?[-+ #0]*\d*(\.\d+)?[sdifuxXcrSn@]|%\d|%[A-Z_]{2,}|\$\(|\$\d|\$[A-Za-z_]+\$?"
    r"|#\d|[{}]|%%"
)
# LibreOffice UI mnemonics: "(_F)" / "(~F)" after CJK labels, "~" and "_" before the key letter.
_MNEMONIC_SUFFIX = re.compile(r"\s*\([_~&][A-Za-z0-9]\)")
_MNEMONIC = re.compile(r"[~_](?=\w)")
_URLISH = re.compile(r"https?://|www\.|\.html?\b|\\|/[a-z]+/|\w+\.\w+\(")


# Control and invisible format characters (categories Cc, Cf) that are not whitespace.
_INVISIBLE = re.compile(
    "[%s]" % "".join(
        re.escape(chr(i)) for i in range(sys.maxunicode + 1)
        if unicodedata.category(chr(i)) in ("Cc", "Cf") and not chr(i).isspace() and chr(i) not in _KEEP_FORMAT
    )
)


def clean(text: str) -> str:
    """NFC; invisible characters removed; any whitespace run (tab, newline, no-break space) one space; trimmed."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFC", text))
    return _WS.sub(" ", text).strip()


def strip_markup(text: str) -> str:
    """Inline markup of UI strings goes (its text stays); entities are decoded (&amp; -> &)."""
    return html.unescape(_TAG.sub("", _BREAK.sub(" ", text)))


def norm_key(text: str) -> str:
    """The key two texts are 'the same' under: NFKC, case-folded, letters/digits/marks only.

    Marks (category M) stay: Hindi and Thai vowel signs are marks, not decoration.
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_KEY_TABLE).split())


class _KeyTable(dict):
    """str.translate table: letters, digits and marks stay, every other character is a space."""

    def __missing__(self, char: int) -> int | str:
        self[char] = char if unicodedata.category(chr(char))[0] in "LNM" else " "
        return self[char]


_KEY_TABLE = _KeyTable()


def has_placeholder(text: str) -> bool:
    return _PLACEHOLDER.search(text) is not None


def en_words(text: str) -> int:
    return len(text.split())


def is_sentence_like(en: str) -> bool:
    """4-40 English words ending in . ? ! (not an ellipsis), no URL or path."""
    n = en_words(en)
    return (
        4 <= n <= 40
        and en[-1] in ".?!"
        and not en.endswith("..")
        and en[0].isupper()
        and _URLISH.search(en) is None
    )


def plausible_translation(lang: str, en: str, xx: str) -> bool:
    """Reject pairs that are untranslated, empty or wildly different in length."""
    ke, kx = norm_key(en), norm_key(xx)
    if not ke or not kx or ke == kx:
        return False
    if lang in NON_LATIN:
        letters = [c for c in xx if c.isalpha()]
        ascii_share = sum(c.isascii() for c in letters) / max(1, len(letters))
        if ascii_share > 0.5:
            return False
    ratio = len(xx) / max(1, len(en))
    low, high = (0.1, 1.5) if lang == "zh" else (0.3, 3.0)
    return low <= ratio <= high or (len(en) < 20 and ratio <= 6)


def stable_rank(*parts: object) -> int:
    """A seeded pseudo-random rank that depends only on its arguments (not on PYTHONHASHSEED)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# Download and unpack
# ------------------------------------------------------------------------------------------


@dataclass
class Package:
    name: str
    version: str
    path: Path  # the downloaded .deb or .whl
    root: Path  # where it is unpacked


def apt_download(names: list[str], work: Path, pins: dict[str, str]) -> dict[str, Package]:
    """``apt-get download`` every package (once), ``dpkg -x`` it, read its version."""
    debs, unpacked = work / "debs", work / "unpacked"
    debs.mkdir(parents=True, exist_ok=True)
    unpacked.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("_")[0]: p for p in debs.glob("*.deb")}
    missing = [n for n in names if n not in have or (n in pins and _deb_version(have[n]) != pins[n])]
    if missing:
        log(f"apt-get download {len(missing)} packages")
        specs = [f"{n}={pins[n]}" if n in pins else n for n in missing]
        result = subprocess.run(["apt-get", "download", *specs], cwd=debs, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(
                f"apt-get download failed ({result.returncode}): {result.stderr.strip()}\n"
                "Run `apt-get update` first; a pinned version must still be in the archive."
            )
        have = {p.name.split("_")[0]: p for p in debs.glob("*.deb")}
    packages = {}
    for name in names:
        deb = have[name]
        version = _deb_version(deb)
        root = unpacked / f"{name}_{version.replace(':', '%3a')}"
        if not (root / ".done").exists():
            log(f"unpack {deb.name}")
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
            (root / ".done").touch()
        packages[name] = Package(name, version, deb, root)
    return packages


def _deb_version(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True, text=True).stdout.strip()


def pip_download_django(work: Path, version: str) -> Package:
    """``pip download --no-deps django==VERSION`` (a wheel is a zip: nothing to unpack)."""
    target = work / "pypi"
    target.mkdir(parents=True, exist_ok=True)
    wheels = sorted(target.glob(f"django-{version}-*.whl")) or sorted(target.glob(f"Django-{version}-*.whl"))
    if not wheels:
        log(f"pip download django=={version}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(target),
             f"django=={version}"],
            check=True,
        )
        wheels = sorted(target.glob(f"*jango-{version}-*.whl"))
    return Package("django", version, wheels[0], wheels[0])


# ------------------------------------------------------------------------------------------
# Extraction: one record per aligned text unit
# ------------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One aligned piece of text: a help paragraph, a UI string, a Firefox entry."""

    source: str  # "help", "ui", "django" or "firefox"
    doc: str  # help file / .mo domain / Firefox file: the document it belongs to
    uid: str  # position inside the document (paragraph id, msgid with context, key)
    order: int  # index in document order
    en: str
    xx: str
    label: str = ""  # help module, for the classification set


_VOID = {"br", "img", "meta", "link", "input", "hr", "col", "area", "base", "embed", "param", "source", "track", "wbr"}
_SKIP_TAGS = {"script", "style", "noscript", "pre", "code", "head", "header", "aside", "nav", "button", "object", "svg"}
_BLOCK_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "td", "li"}
# Paragraph classes that hold code, formulas or media rather than prose.
_SKIP_CLASSES = {"code", "codeintable", "smathcode", "example", "image", "imageintable", "youtube", "finalcutpro"}


class _Node:
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.children = tag, attrs, []


class _TreeBuilder(HTMLParser):
    """A forgiving mini-DOM: the help is generated XHTML, so end tags nearly always match."""

    def __init__(self):
        super().__init__(convert_charrefs=True)  # entities decoded here (&amp; -> &)
        self.root = _Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = _Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(_Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def _render(node: _Node, out: list[str]) -> None:
    """Visible text of a node as a reader of the default (non-Mac) help would see it."""
    if node.tag in _SKIP_TAGS:
        return
    if node.tag == "br":
        out.append(" ")
        return
    children = node.children
    if node.attrs.get("class") == "switchinline":
        # One case per platform / application; all are hidden until JavaScript picks one.
        # Keep the "default" case, else the first: every translation has the same cases.
        cases = [c for c in children if isinstance(c, _Node)]
        default = [c for c in cases if c.attrs.get("id", "").startswith("default")]
        children = default[:1] or cases[:1]
    for child in children:
        if isinstance(child, str):
            out.append(child)
        else:
            _render(child, out)


def help_paragraphs(path: Path) -> dict[str, str]:
    """Paragraph id -> text for every p / h1-6 / td / li with an id; repeated ids dropped.

    Nested blocks (a ``p`` inside a ``td``) each count once: the innermost wins, and the
    outer block keeps only text that is not inside an inner one.
    """
    builder = _TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8", errors="replace"))
    builder.close()
    found: dict[str, str] = {}
    seen: Counter[str] = Counter()

    def walk(node: _Node) -> None:
        for child in node.children:
            if not isinstance(child, _Node) or child.tag in _SKIP_TAGS:
                continue
            pid = child.attrs.get("id", "")
            if child.tag in _BLOCK_TAGS and pid:
                seen[pid] += 1
                if child.attrs.get("class") not in _SKIP_CLASSES and not _has_code(child):
                    found[pid] = _block_text(child)
                walk(child)  # nested blocks with their own ids
            else:
                walk(child)

    walk(builder.root)
    return {pid: text for pid, text in found.items() if seen[pid] == 1 and text}


def _has_code(node: _Node) -> bool:
    return any(
        isinstance(c, _Node) and (c.tag in ("pre", "code") or "code" in c.attrs.get("class", "") or _has_code(c))
        for c in node.children
    )


def _block_text(node: _Node) -> str:
    out: list[str] = []

    def visit(n: _Node) -> None:
        for child in n.children:
            if isinstance(child, str):
                out.append(child)
            elif child.tag in _BLOCK_TAGS and child.attrs.get("id"):
                out.append(" ")  # an inner block is a unit of its own
            else:
                sub: list[str] = []
                _render(child, sub)
                out.append("".join(sub))

    visit(node)
    return clean("".join(out))


def help_label(relpath: str) -> str:
    """text/swriter/... -> writer; shared/explorer/database -> base; other shared -> ''."""
    parts = relpath.split("/")
    if parts[1] in HELP_LABELS:
        return HELP_LABELS[parts[1]]
    if relpath.startswith("text/shared/explorer/database/"):
        return "base"
    return ""


def _mo_catalog(data: bytes) -> dict:
    return gettext.GNUTranslations(io.BytesIO(data))._catalog  # msgid (with context) -> msgstr


def _ui_clean(text: str, brand: dict[str, str]) -> str:
    text = text.replace("\\n", " ")
    for name, value in brand.items():
        text = text.replace(name, value)
    text = strip_markup(text)
    text = _MNEMONIC_SUFFIX.sub("", text)
    text = _MNEMONIC.sub("", text)
    return clean(text)


def extract_gettext(source: str, catalogs: list[tuple[str, bytes]], brand: dict[str, str]) -> list[Unit]:
    """gettext catalogues (domain, .mo bytes): msgid (English) -> msgstr, plurals skipped."""
    units = []
    for domain, data in catalogs:
        order = 0
        for key, value in sorted(_mo_catalog(data).items(), key=lambda kv: str(kv[0])):
            if not isinstance(key, str) or not key or not value:
                continue  # plural forms (tuple keys) and the header
            msgid = key.split("\x04")[-1]
            en, xx = _ui_clean(msgid, brand), _ui_clean(value, brand)
            if en and xx and not has_placeholder(msgid.replace("%PRODUCTNAME", "")) and not has_placeholder(en + xx):
                units.append(Unit(source, domain, key, order, en, xx))
                order += 1
    return units


def lo_ui_catalogs(root: Path) -> list[tuple[str, bytes]]:
    found = sorted(root.glob("usr/lib/libreoffice/program/resource/*/LC_MESSAGES/*.mo"))
    return [(f.stem, f.read_bytes()) for f in found]


def django_catalogs(wheel: Path, locale: str) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist() if f"/locale/{locale}/LC_MESSAGES/" in n and n.endswith(".mo"))
        # domain = app + file, e.g. "contrib/admin:djangojs"
        return [(n.split("/locale/")[0].removeprefix("django/") + ":" + Path(n).stem, z.read(n)) for n in names]


# Firefox -------------------------------------------------------------------------------

_FTL_MESSAGE = re.compile(r"^([A-Za-z][\w-]*)\s*=\s?(.*)$")
_FTL_ATTRIBUTE = re.compile(r"^\s+\.([A-Za-z][\w-]*)\s*=\s?(.*)$")
_SKIP_ATTRIBUTES = {"accesskey", "key", "commandkey", "style", "width", "height"}


def parse_ftl(text: str) -> dict[str, str]:
    """Fluent messages and attributes (``id`` / ``id.attr``) -> pattern text; terms skipped."""
    entries: dict[str, list[str]] = {}
    message = current = None
    for line in text.splitlines():
        if line.startswith("#") or line.startswith("-"):
            message = current = None  # comment or term definition
            continue
        if not line.strip():
            continue
        if m := _FTL_MESSAGE.match(line):
            message = current = m.group(1)
            entries[current] = [m.group(2)]
        elif (m := _FTL_ATTRIBUTE.match(line)) and message:
            current = f"{message}.{m.group(1)}"
            entries[current] = [m.group(2)]
        elif line[0].isspace() and current:
            entries[current].append(line.strip())  # a multi-line pattern
        else:
            message = current = None
    return {
        key: " ".join(p for p in parts if p)
        for key, parts in entries.items()
        if key.rsplit(".", 1)[-1] not in _SKIP_ATTRIBUTES and any(parts)
    }


def parse_properties(text: str) -> dict[str, str]:
    """Java-style .properties (key = value, backslash continuation, \\uXXXX escapes)."""
    entries, pending = {}, ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        key, sep, value = line.partition("=")
        if sep:
            value = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), value.strip())
            entries[key.strip()] = value.replace("\\n", " ").replace("\\t", " ").replace("\\", "")
    return entries


def _firefox_strings(z: zipfile.ZipFile, locale: str) -> dict[tuple[str, str], str]:
    """(file with the locale taken out, key) -> text for every .ftl / .properties file."""
    strings = {}
    for name in sorted(z.namelist()):
        if not name.endswith((".ftl", ".properties")):
            continue
        parts = name.split("/")
        if locale not in parts:
            continue  # not a localisation file (e.g. res/fonts/mathfont.properties)
        key_path = "/".join(p for p in parts if p != locale)  # en-US and xx files meet here
        text = z.read(name).decode("utf-8", errors="replace")
        parsed = parse_ftl(text) if name.endswith(".ftl") else parse_properties(text)
        for key, value in parsed.items():
            strings[(key_path, key)] = value
    return strings


def firefox_english(omni_paths: list[Path]) -> dict[tuple[str, str], str]:
    strings = {}
    for path in omni_paths:
        with zipfile.ZipFile(path) as z:
            strings.update(_firefox_strings(z, "en-US"))
    return strings


def extract_firefox(english: dict[tuple[str, str], str], xpi: Path) -> list[Unit]:
    with zipfile.ZipFile(xpi) as z:
        locale = next(iter(json.loads(z.read("manifest.json"))["languages"]))  # e.g. "zh-CN"
        translated = _firefox_strings(z, locale)
    units, order = [], Counter()
    for (path, key), xx_raw in sorted(translated.items()):
        en_raw = english.get((path, key))
        if en_raw is None or has_placeholder(en_raw) or has_placeholder(xx_raw):
            continue  # placeables and variables ({ $name }, { -brand-name }, %S) are dropped
        en, xx = clean(strip_markup(en_raw)), clean(strip_markup(xx_raw))
        if en and xx:
            units.append(Unit("firefox", path, key, order[path], en, xx))
            order[path] += 1
    return units


# ------------------------------------------------------------------------------------------
# Extraction over all packages
# ------------------------------------------------------------------------------------------

_EN_HELP: dict[str, dict[str, str]] = {}  # relative path -> paragraphs; read once, shared by forks


def _help_pairs(task: tuple[str, str]) -> tuple[str, list[Unit]]:
    lang, xx_root = task
    root, units = Path(xx_root), []
    for rel, en_pars in _EN_HELP.items():
        xx_file = root / rel
        if not xx_file.exists():
            continue
        xx_pars = help_paragraphs(xx_file)
        label = help_label(rel)
        for order, (pid, en) in enumerate(en_pars.items()):
            if xx_pars.get(pid):
                units.append(Unit("help", rel, pid, order, en, xx_pars[pid], label))
    return lang, units


def _help_root(package: Package) -> Path:
    """usr/share/libreoffice/help/<lang dir> (de, zh-CN, en-US ...)."""
    dirs = [d for d in (package.root / "usr/share/libreoffice/help").iterdir() if (d / "text").is_dir()]
    if len(dirs) != 1:
        raise SystemExit(f"{package.name}: expected one help language directory, found {[d.name for d in dirs]}")
    return dirs[0]


def extract_everything(packages: dict[str, Package], django: Package, workers: int):
    """Aligned units per language and source, and every English help paragraph."""
    en_root = _help_root(packages["libreoffice-help-en-us"])
    log("read the English help")
    for en_file in sorted(en_root.glob("text/**/*.html")):
        _EN_HELP[en_file.relative_to(en_root).as_posix()] = help_paragraphs(en_file)
    english = [
        Unit("help", rel, pid, order, text, text, help_label(rel))
        for rel, pars in _EN_HELP.items()
        for order, (pid, text) in enumerate(pars.items())
    ]
    units: dict[str, dict[str, list[Unit]]] = {lang: defaultdict(list) for lang in LANGUAGES}
    tasks = [(lang, str(_help_root(packages[f"libreoffice-help-{p}"]))) for lang, p in HELP_PACKAGES.items()]
    log(f"align the help of {len(tasks)} languages by paragraph id ({workers} processes)")
    if workers > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(_help_pairs, tasks)
    else:
        results = [_help_pairs(t) for t in tasks]
    for lang, found in results:
        units[lang]["help"] = found

    # %PRODUCTNAME and friends are constants of the product, not variables: fill them in.
    lo_version = ".".join(packages["libreoffice-help-en-us"].version.split(":")[-1].split(".")[:2])
    brand = {
        "%PRODUCTNAME": "LibreOffice", "%PRODUCTVERSION": lo_version,
        "%OOOVENDOR": "The Document Foundation", "%MOD1": "Ctrl", "%MOD2": "Alt",
    }
    log("read the LibreOffice UI catalogues")
    for lang, p in L10N_PACKAGES.items():
        units[lang]["ui"] = extract_gettext("ui", lo_ui_catalogs(packages[f"libreoffice-l10n-{p}"].root), brand)
    log("read the Django catalogues")
    for lang, locale in DJANGO_LOCALES.items():
        units[lang]["django"] = extract_gettext("django", django_catalogs(django.path, locale), {})
    log("read the Firefox strings")
    omni = sorted((packages["firefox-esr"].root / "usr/lib").glob("firefox-esr/**/omni.ja"))
    ff_english = firefox_english(omni)
    for lang, p in FIREFOX_PACKAGES.items():
        xpis = sorted(packages[f"firefox-esr-l10n-{p}"].root.glob("usr/lib/firefox-esr/**/langpack-*.xpi"))
        units[lang]["firefox"] = extract_firefox(ff_english, xpis[0])
    return units, english


# ------------------------------------------------------------------------------------------
# Filter, deduplicate, split
# ------------------------------------------------------------------------------------------

MAIN_SOURCES = ("help", "ui", "django")  # training, dev, test; "firefox" is held out


@dataclass
class Pair:
    unit: Unit
    ken: str  # normalised English
    kxx: str  # normalised translation
    sentence: bool  # sentence-like: usable for retrieval

    @property
    def source(self) -> str:
        return self.unit.source


def filter_and_dedupe(lang: str, units: list[Unit], stats: dict) -> list[Pair]:
    """Plausible translations only, each English and each xx text once (first one wins)."""
    pairs, seen_en, seen_xx = [], set(), set()
    for unit in units:
        stats[unit.source]["aligned"] += 1
        if en_words(unit.en) > 150 or not plausible_translation(lang, unit.en, unit.xx):
            continue
        ken, kxx = norm_key(unit.en), norm_key(unit.xx)
        if ken in seen_en or kxx in seen_xx:
            stats[unit.source]["duplicates"] += 1
            continue
        seen_en.add(ken)
        seen_xx.add(kxx)
        pair = Pair(unit, ken, kxx, is_sentence_like(unit.en))
        pairs.append(pair)
        stats[unit.source]["kept"] += 1
        stats[unit.source]["sentence_like"] += pair.sentence
    return pairs


def choose_classification(english: list[Unit], units: dict, args, seed: int):
    """Help paragraphs labelled by module: English train, English + xx test (translations).

    Whole help files go to one side, so train and test never share a page, and the files
    are kept out of every other split. Test files are the ones whose paragraphs are
    translated in the most languages (so that every language gets a test set, as in XNLI,
    where the test sets are translations of one English set); each language's test set is
    balanced over the labels.
    """
    labels, help_langs = args.cls_labels, sorted(HELP_PACKAGES)
    translation = {
        lang: {(u.doc, u.uid): u.xx for u in units[lang].get("help", []) if plausible_translation(lang, u.en, u.xx)}
        for lang in help_langs
    }
    eligible: dict[str, list[Unit]] = defaultdict(list)  # file -> usable paragraphs
    seen = set()
    for u in english:
        key = norm_key(u.en)
        if u.label in labels and u.uid.startswith("par_") and 5 <= en_words(u.en) <= 80 and key not in seen:
            seen.add(key)
            eligible[u.doc].append(u)
    coverage = {(u.doc, u.uid): sum((u.doc, u.uid) in translation[l] for l in help_langs) for d in eligible for u in eligible[d]}
    well_covered = len(help_langs) - 1  # translated everywhere, or everywhere but one language (Hindi)

    def order(u: Unit):  # best-translated paragraphs first, then seeded
        return (-coverage[(u.doc, u.uid)], stable_rank(seed, "cls", u.doc, u.uid))

    train_docs, test_docs = set(), set()
    for label in labels:
        docs = [d for d in eligible if eligible[d][0].label == label]
        share = {d: sum(coverage[(u.doc, u.uid)] >= well_covered for u in eligible[d]) / len(eligible[d]) for d in docs}
        docs.sort(key=lambda d: (-round(share[d], 1), stable_rank(seed, "cls-file", d)))
        n_test = 0
        for d in docs:  # test files first, with a margin for languages that lack a paragraph
            if n_test >= 1.3 * args.cls_test_per_label:
                break
            test_docs.add(d)
            n_test += sum(coverage[(u.doc, u.uid)] >= well_covered for u in eligible[d])
        n_train = 0
        for d in sorted((d for d in docs if d not in test_docs), key=lambda d: stable_rank(seed, "cls-file", d)):
            if n_train >= args.cls_train_per_label:
                break
            train_docs.add(d)
            n_train += len(eligible[d])

    def pick(docs: set[str], label: str) -> list[Unit]:
        return sorted((u for d in docs for u in eligible[d] if u.label == label), key=order)

    out: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(dict)
    train = {l: pick(train_docs, l) for l in labels}
    n = min(args.cls_train_per_label, *(len(v) for v in train.values()))  # balanced
    out["en"]["train"] = [(l, u.en) for l in labels for u in sorted(train[l][:n], key=lambda u: stable_rank(seed, "cls", u.doc, u.uid))]
    test = {l: pick(test_docs, l) for l in labels}
    n = min(args.cls_test_per_label, *(len(v) for v in test.values()))
    out["en"]["test"] = [(l, u.en) for l in labels for u in test[l][:n]]
    for lang in help_langs:
        found = {l: [translation[lang][(u.doc, u.uid)] for u in test[l][:n] if (u.doc, u.uid) in translation[lang]] for l in labels}
        k = min(len(v) for v in found.values())  # balanced per language: as many of each label
        if k >= args.cls_min_per_label:  # else too few to measure (Hindi: help mostly untranslated)
            out[lang]["test"] = [(l, text) for l in labels for text in found[l][:k]]
    for lang in out:  # labels interleaved in a seeded order, not in blocks
        for split, rows in out[lang].items():
            rows.sort(key=lambda row: stable_rank(seed, "cls-order", lang, split, row[1]))
    return out, train_docs | test_docs


def assign_retrieval(candidates: dict[str, list[Pair]], args, seed: int) -> tuple[dict, dict[str, str]]:
    """Dev and test retrieval pairs per language; one English sentence, one split everywhere.

    Languages with the fewest candidates choose first; every language walks its candidates
    in one seeded order of the English text, so the languages mostly pick the same English
    sentences, and a sentence picked for test (dev) in one language is test (dev) or unused
    in all others. Returns ``{lang: {"test": pairs, "dev": pairs}}`` and English key -> split.
    """
    split_of: dict[str, str] = {}
    chosen = {}
    for lang in sorted(candidates, key=lambda l: (len(candidates[l]), l)):
        cands = sorted(candidates[lang], key=lambda p: stable_rank(seed, "eval", p.ken))
        n = len(cands)
        # Small languages (Swahili, Urdu: a hundred sentences or fewer) give most to test.
        want = {"test": min(args.test_size, round((0.4 if n > 500 else 0.6) * n)), "dev": min(args.dev_size, round(0.1 * n))}
        got: dict[str, list[Pair]] = {"test": [], "dev": []}
        for pair in cands:
            split = split_of.get(pair.ken)
            if split is None:
                split = next((s for s in ("test", "dev") if len(got[s]) < want[s]), None)
                if split is None:
                    continue
                split_of[pair.ken] = split
            if len(got[split]) < want[split]:
                got[split].append(pair)
        chosen[lang] = got
    return chosen, split_of


class SubstringIndex:
    """Find which texts contain any of many keys: one big string, one find per key."""

    def __init__(self, keys: list[str]):
        self.text = "\n".join(keys)
        self.starts = []
        pos = 0
        for key in keys:
            self.starts.append(pos)
            pos += len(key) + 1

    def containing(self, needles) -> set[int]:
        import bisect

        hits = set()
        for needle in needles:
            if not needle:
                continue
            i = self.text.find(needle)
            while i != -1:
                hits.add(bisect.bisect_right(self.starts, i) - 1)
                i = self.text.find(needle, i + 1)
        return hits


def drop_containing(items: list, key_of, needles: set[str]) -> list:
    """Items whose normalised text contains none of the needles (eval sentences)."""
    if not items or not needles:
        return items
    bad = SubstringIndex([key_of(x) for x in items]).containing(needles)
    return [x for i, x in enumerate(items) if i not in bad]


def build_splits(units, english: list[Unit], args) -> dict:
    """Everything that is written, as Python lists, plus the statistics for the manifest."""
    seed = args.seed
    stats = {lang: defaultdict(Counter) for lang in LANGUAGES}
    main: dict[str, list[Pair]] = {}
    heldout_pool: dict[str, list[Pair]] = {}
    for lang in LANGUAGES:
        ordered = [u for s in MAIN_SOURCES for u in units[lang].get(s, [])]
        main[lang] = filter_and_dedupe(lang, ordered, stats[lang])
        heldout_pool[lang] = filter_and_dedupe(lang, units[lang].get("firefox", []), stats[lang])

    log("choose the classification set (whole help files)")
    classification, cls_docs = choose_classification(english, units, args, seed)
    cls_en = {norm_key(t) for _, t in classification["en"]["train"] + classification["en"]["test"]}
    cls_xx = {lang: {norm_key(t) for _, t in d.get("test", [])} for lang, d in classification.items()}

    def free(lang: str, p: Pair) -> bool:  # not taken by the classification set
        return p.unit.doc not in cls_docs and p.ken not in cls_en and p.kxx not in cls_xx.get(lang, ())

    pool = {lang: [p for p in main[lang] if free(lang, p)] for lang in LANGUAGES}

    log("choose the dev / test retrieval pairs")
    candidates = {lang: [p for p in pool[lang] if p.sentence] for lang in LANGUAGES}
    retrieval, split_of = assign_retrieval(candidates, args, seed)
    eval_en = set(split_of)  # every English sentence that is dev or test in any language
    eval_xx = {lang: {p.kxx for s in retrieval[lang].values() for p in s} for lang in LANGUAGES}

    log("choose the training text")
    parallel, mono, mono_sources = {}, {}, {}
    for lang in LANGUAGES:
        rest = [p for p in pool[lang] if p.ken not in eval_en and p.kxx not in eval_xx[lang]]
        # Training pairs are kept short (demo models see short sequences); longer
        # paragraphs go to the monolingual text.
        short = [p for p in rest if en_words(p.unit.en) <= args.parallel_max_words]
        # Longer pairs first (sentences teach TLM and XLCO more than one-word labels), each
        # group in seeded order.
        short.sort(key=lambda p: (en_words(p.unit.en) < 4, stable_rank(seed, "train", lang, p.source, p.unit.doc, p.unit.uid)))
        n = min(args.parallel_cap, round(0.75 * len(short)))
        chosen = drop_containing(short[:n], lambda p: p.ken, eval_en)
        chosen = drop_containing(chosen, lambda p: p.kxx, eval_xx[lang])
        parallel[lang] = chosen
        used = {id(p) for p in short[:n]}
        leftover = [p for p in rest if id(p) not in used]
        mono[lang], mono_sources[lang] = monolingual_documents(
            lang, leftover, eval_en, eval_xx[lang], args.mono_bytes, seed
        )
    used_en = {p.ken for lang in LANGUAGES for p in parallel[lang]}
    mono["en"], mono_sources["en"] = english_documents(english, cls_docs, cls_en | eval_en | used_en, eval_en, args.mono_bytes_en, seed)

    log("choose the held-out (Firefox) retrieval pairs")
    shipped_en = (
        [p.ken for lang in LANGUAGES for p in parallel[lang]]
        + [p.ken for lang in LANGUAGES for s in retrieval[lang].values() for p in s]
        + [norm_key(line) for doc in mono["en"] for line in doc]
        + sorted(cls_en)
    )
    en_index, en_set = SubstringIndex(shipped_en), set(shipped_en)
    heldout = {}
    for lang in LANGUAGES:
        shipped_xx = (
            [p.kxx for p in parallel[lang]]
            + [p.kxx for s in retrieval[lang].values() for p in s]
            + [norm_key(line) for doc in mono[lang] for line in doc]
            + sorted(cls_xx.get(lang, ()))
        )
        xx_index, xx_set = SubstringIndex(shipped_xx), set(shipped_xx)
        cands = [p for p in heldout_pool[lang] if p.sentence and p.ken not in en_set and p.kxx not in xx_set]
        # Also out if the sentence occurs inside a shipped paragraph.
        cands = [p for p in cands if not en_index.containing([p.ken]) and not xx_index.containing([p.kxx])]
        cands.sort(key=lambda p: stable_rank(seed, "heldout", p.ken))
        heldout[lang] = cands[: args.heldout_size]
    return {
        "stats": stats, "parallel": parallel, "mono": mono, "mono_sources": mono_sources, "retrieval": retrieval,
        "heldout": heldout, "classification": classification, "cls_docs": sorted(cls_docs),
    }


def monolingual_documents(lang, pairs: list[Pair], eval_en, eval_xx, budget: int, seed: int) -> tuple[list[list[str]], Counter]:
    """xx sides of unused pairs, grouped by document (help file / catalogue), whole documents
    in seeded order until the byte budget is spent; lines that hold an eval sentence go."""
    by_doc: dict[tuple[str, str], list[Pair]] = defaultdict(list)
    for p in pairs:
        by_doc[(p.source, p.unit.doc)].append(p)
    docs, size, sources = [], 0, Counter()
    for key in sorted(by_doc, key=lambda k: stable_rank(seed, "mono", lang, *k)):
        lines = sorted(by_doc[key], key=lambda p: (p.unit.order, p.unit.uid))
        lines = drop_containing(lines, lambda p: p.ken, eval_en)
        lines = drop_containing(lines, lambda p: p.kxx, eval_xx)
        texts = [p.unit.xx for p in lines]
        if not texts:
            continue
        cost = sum(len(t.encode()) + 1 for t in texts)
        if size + cost > budget:
            if size:
                continue  # try a smaller document
            texts = texts[: max(1, len(texts) * budget // cost)]
        docs.append(texts)
        sources[key[0]] += len(texts)
        size += cost
        if size >= 0.98 * budget:
            break
    return docs, sources


def english_documents(english: list[Unit], cls_docs, excluded: set[str], eval_en, budget: int, seed: int):
    """English help files not in the classification set, without eval or parallel text."""
    by_doc: dict[str, list[Unit]] = defaultdict(list)
    seen = set()
    for u in english:
        key = norm_key(u.en)
        if u.doc in cls_docs or key in excluded or key in seen or not key:
            continue
        seen.add(key)
        by_doc[u.doc].append(u)
    pairs = {d: [Pair(u, norm_key(u.en), norm_key(u.en), False) for u in us] for d, us in by_doc.items()}
    flat = [p for d in sorted(pairs) for p in pairs[d]]
    return monolingual_documents("en", flat, eval_en, set(), budget, seed)


# ------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------

LICENCE_OF_SOURCE = {"help": "MPL-2.0", "ui": "MPL-2.0", "firefox": "MPL-2.0", "django": "BSD-3-Clause"}
SOURCE_NAMES = {
    "help": "LibreOffice help", "ui": "LibreOffice UI", "django": "Django", "firefox": "Firefox ESR",
    "en-help": "LibreOffice help",
}


def write_gzip_lines(path: Path, lines: list[str]) -> None:
    """Deterministic gzip: no file name and no time stamp in the header."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(data)


def write_corpus(out: Path, built: dict, packages: list[Package], args, licence_texts: dict[str, str]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():  # a rebuild replaces everything the builder owns
        if old.is_file() and (old.suffix == ".gz" or old.name in ("manifest.json", "README.md", "LICENSES.md")
                              or old.name.startswith("LICENSE.")):
            old.unlink()
    files: dict[str, dict] = {}

    def record(name: str, lines: list[str], sources: Counter, kind: str, lang: str, split: str) -> None:
        write_gzip_lines(out / name, lines)
        data = (out / name).read_bytes()
        licences = sorted({LICENCE_OF_SOURCE[s] for s in sources if sources[s]})
        files[name] = {
            "kind": kind, "language": lang, "split": split, "lines": len(lines),
            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "sources": {SOURCE_NAMES[s]: n for s, n in sorted(sources.items()) if n},
            "licence": " AND ".join(licences),
        }

    counts: dict[str, dict] = {lang: {} for lang in ["en", *LANGUAGES]}
    for lang in LANGUAGES:
        pairs = built["parallel"][lang]
        if pairs:
            record(f"parallel.en-{lang}.tsv.gz", [f"{p.unit.en}\t{p.unit.xx}" for p in pairs],
                   Counter(p.source for p in pairs), "parallel", lang, "train")
        counts[lang]["parallel"] = {"pairs": len(pairs), "by_source": dict(Counter(p.source for p in pairs))}
    for lang in ["en", *LANGUAGES]:
        docs = built["mono"][lang]
        if docs:
            lines = [line for i, doc in enumerate(docs) for line in ([""] if i else []) + doc]
            sources = built["mono_sources"][lang]
            record(f"mono.{lang}.txt.gz", lines, sources, "monolingual", lang, "train")
        counts[lang]["monolingual"] = {"lines": sum(map(len, docs)), "documents": len(docs)}
    for lang in LANGUAGES:
        code = TATOEBA_CODES[lang]
        for split, prefix in (("dev", "tatoeba-dev"), ("test", "tatoeba"), ("heldout", "tatoeba-heldout")):
            pairs = built["heldout"][lang] if split == "heldout" else built["retrieval"][lang][split]
            pairs = sorted(pairs, key=lambda p: stable_rank(args.seed, "order", split, p.ken))
            counts[lang][split] = len(pairs)
            if not pairs:
                continue
            sources = Counter(p.source for p in pairs)
            record(f"{prefix}.{code}-eng.{code}.gz", [p.unit.xx for p in pairs], sources, "retrieval", lang, split)
            record(f"{prefix}.{code}-eng.eng.gz", [p.unit.en for p in pairs], sources, "retrieval", "en", split)
            counts[lang][f"{split}_by_source"] = dict(sources)
    for lang, splits in built["classification"].items():
        for split, rows in splits.items():
            if rows:
                record(f"classification.{lang}.{split}.tsv.gz", [f"{l}\t{t}" for l, t in rows],
                       Counter({"help": len(rows)}), "classification", lang, split)
            counts[lang][f"classification_{split}"] = dict(sorted(Counter(l for l, _ in rows).items()))

    for name, text in licence_texts.items():
        (out / name).write_text(text, encoding="utf-8")
    manifest = make_manifest(built, packages, args, files, counts)
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (out / "README.md").write_text(make_readme(manifest), encoding="utf-8")
    (out / "LICENSES.md").write_text(make_licences(manifest), encoding="utf-8")
    return manifest


def make_manifest(built, packages, args, files, counts) -> dict:
    extracted = {
        lang: {SOURCE_NAMES[s]: dict(c) for s, c in sorted(built["stats"][lang].items())} for lang in LANGUAGES
    }
    return {
        "name": "infoxlm demo corpus",
        "description": "English and 14 languages of software documentation and UI text, aligned from "
        "LibreOffice help and UI translations, Django catalogues and Firefox ESR language packs.",
        "build": {
            "script": "scripts/build_demo_corpus.py",
            "command": "python scripts/build_demo_corpus.py " + " ".join(_command_args(args)),
            "seed": args.seed,
            "options": {k.replace("-", "_"): getattr(args, k) for k in (
                "parallel_cap", "parallel_max_words", "mono_bytes", "mono_bytes_en", "test_size", "dev_size",
                "heldout_size", "cls_train_per_label", "cls_test_per_label", "cls_min_per_label", "cls_labels")},
            "python": platform.python_version(),
            "steps": [
                "apt-get download / pip download --no-deps",
                "dpkg -x / unzip",
                "align: help paragraphs by id within the same file (repeated ids dropped); gettext msgid -> msgstr; "
                "Firefox .ftl/.properties entries by file and key",
                "clean: markup stripped, entities decoded, UI mnemonics removed, %PRODUCTNAME-style constants "
                "filled in, strings with any other placeholder dropped, NFC, whitespace collapsed",
                "filter: untranslated, empty or length-mismatched pairs dropped",
                "deduplicate: normalised text (NFKC, case-folded, letters/digits/marks), both sides, per language",
                "split: classification files first, then dev/test (one split per English sentence across all "
                "languages), then training text; no normalised sentence of dev/test/heldout occurs in training "
                "text (as a line or inside a paragraph), on either side",
            ],
            "normalisation": "NFC",
            "sentence_like": "4-40 English words, starts upper case, ends in . ? ! (no ellipsis), no URL or path",
        },
        "packages": [
            {"name": p.name, "version": p.version, "file": p.path.name,
             "sha256": hashlib.sha256(p.path.read_bytes()).hexdigest(),
             "registry": "PyPI" if p.name == "django" else "Debian 12 (bookworm) apt",
             "licence": "BSD-3-Clause" if p.name == "django" else "MPL-2.0"}
            for p in packages
        ],
        "sources": {
            "LibreOffice help": {"licence": "MPL-2.0 (parts incorporate Apache-2.0 work of Apache OpenOffice)",
                                 "used_for": ["parallel", "monolingual", "dev", "test", "classification"],
                                 "languages": sorted(HELP_PACKAGES)},
            "LibreOffice UI": {"licence": "MPL-2.0", "used_for": ["parallel", "monolingual", "dev", "test"],
                               "languages": sorted(L10N_PACKAGES)},
            "Django": {"licence": "BSD-3-Clause", "used_for": ["parallel", "monolingual", "dev", "test"],
                       "languages": sorted(DJANGO_LOCALES)},
            "Firefox ESR": {"licence": "MPL-2.0", "used_for": ["heldout"], "languages": sorted(FIREFOX_PACKAGES)},
        },
        "heldout_source": "Firefox ESR",
        "languages": LANGUAGES,
        "tatoeba_codes": TATOEBA_CODES,
        "classification_labels": list(args.cls_labels),
        "classification_help_files": built["cls_docs"],
        "extracted_pairs": extracted,
        "counts": counts,
        "files": dict(sorted(files.items())),
        "total_bytes": sum(f["bytes"] for f in files.values()),
    }


def _command_args(args) -> list[str]:
    out = [f"--seed {args.seed}"]
    for name in ("parallel_cap", "parallel_max_words", "mono_bytes", "mono_bytes_en", "test_size", "dev_size", "heldout_size",
                 "cls_train_per_label", "cls_test_per_label", "cls_min_per_label"):
        out.append(f"--{name.replace('_', '-')} {getattr(args, name)}")
    out.append("--cls-labels " + " ".join(args.cls_labels))
    return out


LANGUAGE_NAMES = {
    "en": "English", "ar": "Arabic", "bg": "Bulgarian", "de": "German", "el": "Greek", "es": "Spanish",
    "fr": "French", "hi": "Hindi", "ru": "Russian", "sw": "Swahili", "th": "Thai", "tr": "Turkish",
    "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese (Simplified)",
}


def make_readme(m: dict) -> str:
    c = m["counts"]
    total_kib = m["total_bytes"] / 1024
    rows = []
    for lang in ["en", *LANGUAGES]:
        k = c[lang]
        par = k.get("parallel", {}).get("pairs", "")
        srcs = ", ".join(f"{SOURCE_NAMES[s]} {n}" for s, n in sorted(k.get("parallel", {}).get("by_source", {}).items()))
        cls = sum(k.get("classification_test", {}).values()) or ""
        if lang == "en":
            cls = f"{sum(k['classification_train'].values())} train / {sum(k['classification_test'].values())} test"
        rows.append(
            f"| {lang} | {LANGUAGE_NAMES[lang]} | {par} | {srcs} | {k['monolingual']['lines']} "
            f"({k['monolingual']['documents']} docs) | {k.get('dev', '')} | {k.get('test', '')} | "
            f"{k.get('heldout', '')} | {cls} |"
        )
    missing_test = [l for l in LANGUAGES if not c[l].get("test")]
    no_cls = [l for l in sorted(HELP_PACKAGES) if not c[l].get("classification_test")]
    base_note = "" if "base" in m["classification_labels"] else (
        " Base is left out: its help pages are\n  rarely translated (in Russian, Vietnamese and Chinese fewer than one in ten of its\n"
        "  paragraphs), so a balanced test set would be tiny."
    )
    source_rows = []
    for lang in LANGUAGES:
        e = m["extracted_pairs"][lang]
        cells = [
            f"{e[name]['kept']} / {e[name]['sentence_like']}" if name in e else "–"
            for name in ("LibreOffice help", "LibreOffice UI", "Django", "Firefox ESR")
        ]
        source_rows.append(f"| {lang} | " + " | ".join(cells) + " |")
    missing_heldout = [l for l in LANGUAGES if not c[l].get("heldout")]
    labels = ", ".join(m["classification_labels"])
    return f"""# The infoxlm demo corpus

Real translations, small enough to ship inside the package ({total_kib:,.0f} KiB of gzip files):
English and the 14 languages of the InfoXLM paper (ar bg de el es fr hi ru sw th tr ur vi zh).
Built by `scripts/build_demo_corpus.py` (seed {m['build']['seed']}) from Debian 12 and PyPI packages;
`manifest.json` lists the package versions, every file with its line count, size, sources,
licence and SHA-256, and how many pairs each source gave per language.

**What this text is.** Software documentation and user-interface text: LibreOffice help pages
and dialog strings, Django's messages, Firefox's messages. It is not everyday language: expect
"Click OK to close the dialog." rather than "I'm going home." Models trained on it learn the
register of manuals; retrieval scores on it are not comparable with scores on Tatoeba.

**Weak languages.** Swahili (sw) comes from Django's catalogues only (a few hundred short
strings; no LibreOffice or Firefox translation is packaged): its dev / test sets are tiny and
its training text is a few hundred lines (test {c['sw'].get('test', 0)} pairs, dev {c['sw'].get('dev', 0)}, no held-out set).
Urdu (ur) has no LibreOffice translation: its main data is Django's too (test
{c['ur'].get('test', 0)} pairs, dev {c['ur'].get('dev', 0)}); its Firefox strings make a {c['ur'].get('heldout', 0)}-pair held-out set. Arabic, Bulgarian and Thai have no
LibreOffice help: UI strings only. Hindi's help is mostly untranslated, so it has less help
text than the other help languages. Translators make mistakes; expect some noise.

## Files

| file | what |
|---|---|
| `parallel.en-XX.tsv.gz` | training pairs, `English<TAB>XX` per line (`infoxlm prepare parallel --tsv`) |
| `mono.XX.txt.gz` | training monolingual text, one paragraph / string per line, documents (help pages, message catalogues) separated by a blank line |
| `tatoeba-dev.XXX-eng.XXX.gz`, `tatoeba-dev.XXX-eng.eng.gz` | dev retrieval set, Tatoeba / LASER format: line *i* of one file is the translation of line *i* of the other |
| `tatoeba.XXX-eng.XXX.gz`, `tatoeba.XXX-eng.eng.gz` | test retrieval set, same format (XXX = ISO 639-3: {' '.join(TATOEBA_CODES[l] for l in LANGUAGES)}) |
| `tatoeba-heldout.XXX-eng.XXX.gz`, `tatoeba-heldout.XXX-eng.eng.gz` | held-out retrieval test set from Firefox ESR, a source the training text never uses |
| `classification.en.train.tsv.gz`, `classification.XX.test.tsv.gz` (and `classification.en.test.tsv.gz`) | cross-lingual transfer classification, `label<TAB>text`: which LibreOffice module a help paragraph belongs to ({labels}); train in English, test in every language with translated help |
| `manifest.json`, `LICENSES.md`, `LICENSE.*.txt` | provenance, counts, licences |

Load them with `infoxlm.demo.corpus` (`load_parallel`, `load_monolingual`, `retrieval_pairs`,
`classification`, `export_training_text`).

## Splits and how they are kept apart

* Sources: LibreOffice help (paragraphs aligned by their `id` within the same help page),
  LibreOffice UI (gettext catalogues, msgid -> msgstr), Django (gettext catalogues), and
  Firefox ESR (Fluent and .properties entries aligned by key; held out).
* Every text is NFC. Markup is stripped and entities decoded; strings with placeholders
  (`%s`, `{{0}}`, `$1`, `{{ $name }}` ...) are dropped; untranslated pairs are dropped.
* Deduplicated on normalised text (NFKC, case-folded, letters/digits/marks only) on both sides.
* Dev, test and held-out pairs are *sentence-like*: {m['build']['sentence_like']}.
* No overlap: an English sentence is dev or test for every language that uses it (never dev
  in one and test in another), and no dev / test / held-out sentence occurs in any training
  file, in any language, on either side — not as a line, nor inside a paragraph. The
  classification set comes from whole help pages that are used nowhere else.
* Held out: **Firefox ESR** strings appear only in `tatoeba-heldout.*`, never in training,
  dev or test. Use it to check that a gain (say, from XLCO) carries over to text from a
  source the model never saw. Firefox has no Swahili, so there is no held-out Swahili set.
* Classification: labels come from the help path (text/swriter -> writer, text/scalc -> calc,
  text/simpress -> impress, text/sdraw -> draw, text/smath -> math, text/schart -> chart;
  also available to the builder: text/sdatabase and text/shared/explorer/database -> base,
  text/sbasic -> basic). Labels used: {labels}.{base_note} Whole help pages go to train or test;
  test paragraphs in each language are translations of the English test paragraphs (as in
  XNLI), balanced over the labels. Languages with help but no classification set (fewer than
  {m['build']['options']['cls_min_per_label']} translated test paragraphs per label): {', '.join(no_cls) or 'none'}. Some paragraphs
  name their module ("In LibreOffice Calc ..."), which makes them easy in every language.

## Counts

Parallel = training pairs; mono = lines (documents); dev / test / heldout = retrieval pairs;
cls = classification examples.

| code | language | parallel | parallel by source | mono | dev | test | heldout | cls |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Languages without a test set: {', '.join(missing_test) or 'none'}. Without a held-out set:
{', '.join(missing_heldout) or 'none'}.

What each source gave per language, after cleaning, filtering and deduplication (before
the splits and the caps; deduplicated in the order help, UI, Django, so a UI string already
in the help counts for the help; Firefox on its own): usable pairs / sentence-like pairs.
"–": no package.

| code | LibreOffice help | LibreOffice UI | Django | Firefox ESR (held out) |
|---|---|---|---|---|
{chr(10).join(source_rows)}

## Rebuilding

```
{m['build']['command']} --work-dir /tmp/demo-corpus-work
```

needs `apt-get` (Debian/Ubuntu, after `apt-get update`), `dpkg` and `pip`; about 130 MB of
downloads. `--versions-from src/infoxlm/demo/corpus/manifest.json` pins the package versions
recorded here. The output depends only on the seed and the package versions.

## Licences

See `LICENSES.md`: data from LibreOffice and Firefox is under the Mozilla Public License 2.0
(file-level copyleft: these data files stay under MPL-2.0), data from Django under Django's
BSD-3-Clause licence.
"""


def make_licences(m: dict) -> str:
    by_licence: dict[str, list[str]] = defaultdict(list)
    for name, f in m["files"].items():
        by_licence[f["licence"]].append(f"`{name}` ({', '.join(f['sources'])})")
    blocks = "\n\n".join(f"**{lic}**\n\n" + "\n".join(f"- {x}" for x in sorted(names)) for lic, names in sorted(by_licence.items()))
    versions = "\n".join(f"- {p['name']} {p['version']} ({p['registry']})" for p in m["packages"])
    return f"""# Licences of the demo corpus data

The code of infoxlm is under its own licence (see the project's pyproject.toml). The data
files in this directory are not: each keeps the licence of the text it was made from.

## Sources

| source | copyright | licence |
|---|---|---|
| LibreOffice help and UI translations (Debian packages libreoffice-help-*, libreoffice-l10n-*) | Copyright 2000, 2010 Oracle and/or its affiliates; Copyright (c) 2000, 2010 LibreOffice contributors and/or their affiliates | MPL-2.0; some files incorporate Apache-2.0 work (see below) |
| Firefox ESR strings (Debian packages firefox-esr, firefox-esr-l10n-*) | Mozilla Foundation and contributors | MPL-2.0 |
| Django message catalogues (PyPI django) | Copyright (c) Django Software Foundation and individual contributors | BSD-3-Clause |

Packages used:

{versions}

## What redistribution requires, and how this directory does it

**MPL-2.0 (LibreOffice, Firefox).** The MPL is a file-level copyleft. A data file made from
MPL-covered text is "Covered Software" in Source Code Form, so:

1. It is distributed under the terms of the MPL-2.0, and recipients must be told so and
   where to get the licence (MPL-2.0 section 3.1). This notice applies to every file listed
   under MPL-2.0 below:

   > This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0.
   > If a copy of the MPL was not distributed with this file, You can obtain one at
   > https://mozilla.org/MPL/2.0/.

   The full text is in `LICENSE.MPL-2.0.txt`.
2. Copyright notices of the originals must not be removed (section 3.4): they are kept in
   the table above.
3. The Source Code Form of these files is the files themselves (plain UTF-8 text, gzip
   compressed); the program that made them, `scripts/build_demo_corpus.py`, and the exact
   package versions (`manifest.json`) are part of the project, so anyone can rebuild them.
4. The MPL does not extend to other files: the infoxlm code that reads these files may
   keep its own licence (section 3.3, "Larger Work").

LibreOffice's text also incorporates work licensed to the Apache Software Foundation under
the Apache License 2.0 (from Apache OpenOffice): "Licensed to the Apache Software Foundation
(ASF) under one or more contributor license agreements. The ASF licenses this file to you
under the Apache License, Version 2.0" — see http://www.apache.org/licenses/LICENSE-2.0 .

**BSD-3-Clause (Django).** Redistribution must retain Django's copyright notice, its list
of conditions and its disclaimer, and must not use the names of Django or its contributors
to endorse products. Django's licence is reproduced in full in `LICENSE.Django-BSD-3-Clause.txt`.
Files that mix LibreOffice and Django lines are listed below as "BSD-3-Clause AND MPL-2.0":
the file is distributed under the MPL-2.0 (its LibreOffice lines require it), the Django
lines in it remain under BSD-3-Clause, and Django's notice is kept here, as its licence
permits.

## Which file comes from which source

{blocks}

`manifest.json`, `README.md` and this file were written by the builder and describe the data.
"""


# ------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Build the infoxlm demo corpus (src/infoxlm/demo/corpus) from LibreOffice, Firefox "
        "and Django translations fetched with apt-get / pip.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--work-dir", type=Path, default=Path.home() / ".cache/infoxlm/demo-corpus-work",
                   help="where packages are downloaded and unpacked (about 800 MB); reused when run again")
    p.add_argument("--output", type=Path, default=Path("src/infoxlm/demo/corpus"), help="the corpus directory")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (splits, sampling, order)")
    p.add_argument("--versions-from", type=Path, help="a manifest.json whose package versions to download")
    p.add_argument("--django-version", default=DJANGO_DEFAULT_VERSION, help="Django release on PyPI")
    p.add_argument("--parallel-cap", type=int, default=2500, help="training pairs per language, at most")
    p.add_argument("--parallel-max-words", type=int, default=50, help="longest English side of a training pair")
    p.add_argument("--mono-bytes", type=int, default=60_000, help="monolingual UTF-8 bytes per language, about")
    p.add_argument("--mono-bytes-en", type=int, default=150_000, help="English monolingual UTF-8 bytes, about")
    p.add_argument("--test-size", type=int, default=1000, help="test retrieval pairs per language, at most")
    p.add_argument("--dev-size", type=int, default=300, help="dev retrieval pairs per language, at most")
    p.add_argument("--heldout-size", type=int, default=500, help="held-out (Firefox) pairs per language, at most")
    p.add_argument("--cls-train-per-label", type=int, default=300, help="English classification examples per label")
    p.add_argument("--cls-test-per-label", type=int, default=100, help="classification test examples per label")
    p.add_argument("--cls-min-per-label", type=int, default=25,
                   help="a language gets a classification test set only with this many examples per label")
    p.add_argument("--cls-labels", nargs="+", default=["writer", "calc", "impress", "draw", "math", "chart"],
                   choices=sorted(set(HELP_LABELS.values())), help="help modules used as classification labels")
    p.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="processes for the help")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    work = args.work_dir.resolve()
    pins, django_version = {}, args.django_version
    if args.versions_from:
        old = json.loads(args.versions_from.read_text(encoding="utf-8"))
        pins = {p["name"]: p["version"] for p in old["packages"] if p["name"] != "django"}
        django_version = next((p["version"] for p in old["packages"] if p["name"] == "django"), django_version)
    names = (
        ["libreoffice-help-en-us"]
        + [f"libreoffice-help-{p}" for p in HELP_PACKAGES.values()]
        + [f"libreoffice-l10n-{p}" for p in L10N_PACKAGES.values()]
        + ["firefox-esr"]
        + [f"firefox-esr-l10n-{p}" for p in FIREFOX_PACKAGES.values()]
    )
    packages = apt_download(names, work, pins)
    django = pip_download_django(work, django_version)
    units, english = extract_everything(packages, django, args.workers)
    for lang in LANGUAGES:
        log(f"{lang}: " + ", ".join(f"{s} {len(u)}" for s, u in units[lang].items() if u))
    built = build_splits(units, english, args)

    licence_texts = {"LICENSE.MPL-2.0.txt": _mpl_text()}
    with zipfile.ZipFile(django.path) as z:
        lic = next(n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE"))
        licence_texts["LICENSE.Django-BSD-3-Clause.txt"] = z.read(lic).decode("utf-8")
    manifest = write_corpus(args.output, built, [*packages.values(), django], args, licence_texts)
    total = sum(f.stat().st_size for f in args.output.iterdir() if f.is_file())
    log(f"wrote {len(manifest['files'])} data files, {manifest['total_bytes'] / 1e6:.2f} MB "
        f"({total / 1e6:.2f} MB with licences and docs) to {args.output} in {time.time() - started:.0f} s")
    return 0


def _mpl_text() -> str:
    """The MPL-2.0 text as Debian ships it (base-files' common-licenses)."""
    path = Path("/usr/share/common-licenses/MPL-2.0")
    if not path.exists():
        raise SystemExit(f"{path} not found: install Debian's base-files, or put the MPL-2.0 text there")
    return path.read_text(encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
