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

The tables are written out here rather than taken from a package: no installed package
carries ISO 639, and a few hundred lines of text are cheaper than a dependency.

Canonical spelling: language lower case, script title case, region upper case, ``-`` as the
separator (``ZH_hans`` -> ``zh-Hans``).

>>> canonical_language("pt_br"), canonical_language("deu"), canonical_language("zh-hant")
('pt-BR', 'de', 'zh-Hant')
>>> parse_language_pair("en-zh-Hans")
('en', 'zh-Hans')
"""

from __future__ import annotations

import re

from infoxlm.errors import DataError

__all__ = [
    "ISO_639_1",
    "ISO_639_3",
    "canonical_language",
    "is_english",
    "language_name",
    "parse_language_pair",
]

# ISO 639-1 code, ISO 639-3 (= 639-2/T) code, English name. One language per line.
_ISO_639_1_TABLE = """\
aa aar Afar
ab abk Abkhazian
ae ave Avestan
af afr Afrikaans
ak aka Akan
am amh Amharic
an arg Aragonese
ar ara Arabic
as asm Assamese
av ava Avaric
ay aym Aymara
az aze Azerbaijani
ba bak Bashkir
be bel Belarusian
bg bul Bulgarian
bi bis Bislama
bm bam Bambara
bn ben Bengali
bo bod Tibetan
br bre Breton
bs bos Bosnian
ca cat Catalan
ce che Chechen
ch cha Chamorro
co cos Corsican
cr cre Cree
cs ces Czech
cu chu Church Slavonic
cv chv Chuvash
cy cym Welsh
da dan Danish
de deu German
dv div Dhivehi
dz dzo Dzongkha
ee ewe Ewe
el ell Greek
en eng English
eo epo Esperanto
es spa Spanish
et est Estonian
eu eus Basque
fa fas Persian
ff ful Fulah
fi fin Finnish
fj fij Fijian
fo fao Faroese
fr fra French
fy fry Western Frisian
ga gle Irish
gd gla Scottish Gaelic
gl glg Galician
gn grn Guarani
gu guj Gujarati
gv glv Manx
ha hau Hausa
he heb Hebrew
hi hin Hindi
ho hmo Hiri Motu
hr hrv Croatian
ht hat Haitian Creole
hu hun Hungarian
hy hye Armenian
hz her Herero
ia ina Interlingua
id ind Indonesian
ie ile Interlingue
ig ibo Igbo
ii iii Sichuan Yi
ik ipk Inupiaq
io ido Ido
is isl Icelandic
it ita Italian
iu iku Inuktitut
ja jpn Japanese
jv jav Javanese
ka kat Georgian
kg kon Kongo
ki kik Kikuyu
kj kua Kuanyama
kk kaz Kazakh
kl kal Kalaallisut
km khm Khmer
kn kan Kannada
ko kor Korean
kr kau Kanuri
ks kas Kashmiri
ku kur Kurdish
kv kom Komi
kw cor Cornish
ky kir Kyrgyz
la lat Latin
lb ltz Luxembourgish
lg lug Ganda
li lim Limburgish
ln lin Lingala
lo lao Lao
lt lit Lithuanian
lu lub Luba-Katanga
lv lav Latvian
mg mlg Malagasy
mh mah Marshallese
mi mri Maori
mk mkd Macedonian
ml mal Malayalam
mn mon Mongolian
mr mar Marathi
ms msa Malay
mt mlt Maltese
my mya Burmese
na nau Nauru
nb nob Norwegian Bokmål
nd nde North Ndebele
ne nep Nepali
ng ndo Ndonga
nl nld Dutch
nn nno Norwegian Nynorsk
no nor Norwegian
nr nbl South Ndebele
nv nav Navajo
ny nya Chichewa
oc oci Occitan
oj oji Ojibwa
om orm Oromo
or ori Odia
os oss Ossetian
pa pan Punjabi
pi pli Pali
pl pol Polish
ps pus Pashto
pt por Portuguese
qu que Quechua
rm roh Romansh
rn run Kirundi
ro ron Romanian
ru rus Russian
rw kin Kinyarwanda
sa san Sanskrit
sc srd Sardinian
sd snd Sindhi
se sme Northern Sami
sg sag Sango
sh hbs Serbo-Croatian
si sin Sinhala
sk slk Slovak
sl slv Slovenian
sm smo Samoan
sn sna Shona
so som Somali
sq sqi Albanian
sr srp Serbian
ss ssw Swati
st sot Southern Sotho
su sun Sundanese
sv swe Swedish
sw swa Swahili
ta tam Tamil
te tel Telugu
tg tgk Tajik
th tha Thai
ti tir Tigrinya
tk tuk Turkmen
tl tgl Tagalog
tn tsn Tswana
to ton Tongan
tr tur Turkish
ts tso Tsonga
tt tat Tatar
tw twi Twi
ty tah Tahitian
ug uig Uyghur
uk ukr Ukrainian
ur urd Urdu
uz uzb Uzbek
ve ven Venda
vi vie Vietnamese
vo vol Volapük
wa wln Walloon
wo wol Wolof
xh xho Xhosa
yi yid Yiddish
yo yor Yoruba
za zha Zhuang
zh zho Chinese
zu zul Zulu
"""

# ISO 639-3 codes of languages that have no ISO 639-1 code: Tatoeba (XTREME), FLORES-200,
# CC-100 and a few other languages common in multilingual corpora.
_ISO_639_3_TABLE = """\
ace Acehnese
acm Mesopotamian Arabic
acq Ta'izzi-Adeni Arabic
aeb Tunisian Arabic
ajp South Levantine Arabic
als Tosk Albanian
ang Old English
apc North Levantine Arabic
arb Standard Arabic
arq Algerian Arabic
ars Najdi Arabic
ary Moroccan Arabic
arz Egyptian Arabic
ast Asturian
awa Awadhi
ayr Central Aymara
azb South Azerbaijani
azj North Azerbaijani
ban Balinese
bar Bavarian
bem Bemba
ber Berber languages
bho Bhojpuri
bjn Banjar
bug Buginese
cbk Chavacano
ceb Cebuano
chr Cherokee
cjk Chokwe
ckb Central Kurdish
cmn Mandarin Chinese
cop Coptic
crh Crimean Tatar
csb Kashubian
dik Southwestern Dinka
doi Dogri
dsb Lower Sorbian
dtp Kadazan Dusun
dyu Dyula
ekk Standard Estonian
fil Filipino
fon Fon
frp Arpitan
frr Northern Frisian
fur Friulian
fuv Nigerian Fulfulde
gaz West Central Oromo
gom Goan Konkani
got Gothic
grc Ancient Greek
gsw Swiss German
hak Hakka Chinese
haw Hawaiian
hmn Hmong
hne Chhattisgarhi
hsb Upper Sorbian
ilo Iloko
jbo Lojban
kab Kabyle
kac Kachin
kam Kamba
kbp Kabiyè
kea Kabuverdianu
khk Halh Mongolian
kmb Kimbundu
kmr Northern Kurdish
knc Central Kanuri
kok Konkani
ksh Kölsch
kzj Coastal Kadazan
lad Ladino
lfn Lingua Franca Nova
lij Ligurian
lmo Lombard
ltg Latgalian
lua Luba-Lulua
luo Luo
lus Mizo
lvs Standard Latvian
mag Magahi
mai Maithili
max North Moluccan Malay
mfe Morisyen
mhr Eastern Mari
min Minangkabau
mni Manipuri
mos Mossi
mww Hmong Daw
nah Nahuatl languages
nan Min Nan Chinese
nds Low German
nov Novial
npi Nepali (individual language)
nso Northern Sotho
nus Nuer
ory Odia (individual language)
orv Old Russian
pag Pangasinan
pam Pampanga
pap Papiamento
pbt Southern Pashto
pes Iranian Persian
plt Plateau Malagasy
pms Piedmontese
prs Dari
quy Ayacucho Quechua
rue Rusyn
sah Yakut
sat Santali
scn Sicilian
sco Scots
shn Shan
swg Swabian
swh Swahili (individual language)
szl Silesian
taq Tamasheq
tok Toki Pona
tpi Tok Pisin
tum Tumbuka
tzl Talossan
tzm Central Atlas Tamazight
umb Umbundu
uzn Northern Uzbek
vec Venetian
vls West Flemish
war Waray
wuu Wu Chinese
ydd Eastern Yiddish
yue Cantonese
zea Zeeuws
zsm Standard Malay
"""

# Spellings that name a language with a two-letter code: ISO 639-2/B codes and ISO 639-1
# codes that were withdrawn in favour of others.
_ALIASES = {
    "alb": "sq", "arm": "hy", "baq": "eu", "bur": "my", "chi": "zh", "cze": "cs", "dut": "nl",
    "fre": "fr", "geo": "ka", "ger": "de", "gre": "el", "ice": "is", "mac": "mk", "mao": "mi",
    "may": "ms", "per": "fa", "rum": "ro", "slo": "sk", "tib": "bo", "wel": "cy",
    "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro",
}  # fmt: skip


def _parse_tables() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    two_letter: dict[str, str] = {}
    three_letter: dict[str, str] = {}
    to_two_letter = dict(_ALIASES)
    for row in _ISO_639_1_TABLE.splitlines():
        code, code3, name = row.split(" ", 2)
        two_letter[code] = name
        three_letter[code3] = name
        to_two_letter[code3] = code
    for row in _ISO_639_3_TABLE.splitlines():
        code3, name = row.split(" ", 1)
        three_letter[code3] = name
    return two_letter, three_letter, to_two_letter


#: ISO 639-1 code -> English name (184 codes).
ISO_639_1: dict[str, str]
#: ISO 639-3 code -> English name: the languages of ISO_639_1 and those listed above.
ISO_639_3: dict[str, str]
ISO_639_1, ISO_639_3, _TO_TWO_LETTER = _parse_tables()

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
