"""Tatoeba (and any bitext retrieval set) in XTREME's protocol, at one layer or all of them.

Data: LASER-format files ``tatoeba.{xxx}-eng.{xxx}`` and ``tatoeba.{xxx}-eng.eng`` in one
directory (line i of one translates line i of the other), or ``hf:xtreme`` for the Hugging Face
``xtreme`` dataset's ``tatoeba.{xxx}`` configs when ``datasets`` and those data are available
locally. Sentences are embedded as ``<s> … </s>`` (max 512 tokens), mean-pooled over the
non-padding tokens of a layer (specials included), and matched by cosine nearest neighbour.

Layers are Hugging Face ``hidden_states`` indices: 0 is the embedding output, k the output of
layer k. XTREME's code numbers the Transformer layers from 0 without the embedding output, so
its layer n is index n + 1 here (its default "7" is ``--layer 8``); the InfoXLM paper's
layer-wise figure counts layers from 1, which is this index. Without a chosen layer, the
layer is ``default_layer``'s (model/sentence_layer.py), the rule every command shares: the
contrast layer the model records, else XTREME's for 12- and 24-layer models, else the middle
layer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np

from ..embedding import embed_layers
from ..corpus.inputs import HubDataset, input_source
from ..corpus.parallel_text import is_header
from ..corpus.record_files import load_hub_dataset, record_pair_blocks
from ..errors import EvalDataError
from ..model.encoder import Encoder
from ..tokenizer import Tokenizer
from .eval_lines import read_lines
from .retrieval import retrieval_accuracy

# ISO 639-1 → the 3-letter codes of the Tatoeba files (fa → pes, sw → swh, zh → cmn).
TATOEBA_CODES = {
    "af": "afr", "ar": "ara", "bg": "bul", "bn": "ben", "de": "deu", "el": "ell", "es": "spa", "et": "est",
    "eu": "eus", "fa": "pes", "fi": "fin", "fr": "fra", "he": "heb", "hi": "hin", "hu": "hun", "id": "ind",
    "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz", "ko": "kor", "ml": "mal", "mr": "mar",
    "nl": "nld", "pt": "por", "ru": "rus", "sw": "swh", "ta": "tam", "te": "tel", "th": "tha", "tl": "tgl",
    "tr": "tur", "ur": "urd", "vi": "vie", "zh": "cmn",
}
# The InfoXLM paper's 14 languages, and XTREME's 36.
PAPER_14 = ["ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"]
XTREME_36 = [
    "ar", "he", "vi", "id", "jv", "tl", "eu", "ml", "ta", "te", "af", "nl", "de", "el", "bn", "hi", "mr", "ur",
    "fa", "fr", "it", "pt", "es", "bg", "ru", "ja", "ka", "ko", "th", "sw", "zh", "kk", "tr", "et", "fi", "hu",
]
LANGUAGE_SETS = {"paper14": PAPER_14, "xtreme36": XTREME_36}  # --langs names for these lists


@dataclass(frozen=True)
class RecordPairs:
    """Pairs as two fields of records: a JSON Lines or Parquet file (what ``prepare parallel``
    reads with ``--src-field`` / ``--tgt-field``), the xx side in ``src_field``, English in
    ``tgt_field``."""

    path: Path
    src_field: str
    tgt_field: str

    def load(self) -> tuple[list[str], list[str]]:
        xx, en = [], []
        for block in record_pair_blocks(input_source(self.path, "--data"), self.src_field, self.tgt_field):
            for a, b in zip(block.src, block.tgt):
                if a is None or b is None:
                    raise EvalDataError(f"{self.path}: a record whose {self.src_field!r} or {self.tgt_field!r} is empty or null; "
                                        "expected both sides of every pair")
                xx.append(a)
                en.append(b)
        return xx, en


# What pairs are read from: a LASER directory, hf:NAME or a TSV file (a str), two line-aligned
# files (xx, English), or the fields of records.
PairData = Union[str, tuple[Path, Path], RecordPairs]


def tatoeba_code(language: str) -> str:
    """'de' or 'deu' → 'deu'."""
    if language in TATOEBA_CODES:
        return TATOEBA_CODES[language]
    if len(language) == 3 and language.isalpha():
        return language
    raise EvalDataError(f"language {language!r}: expected an ISO 639-1 code with a Tatoeba file code or a 3-letter code")


def resolve_languages(requested: Sequence[str] | None, data: PairData) -> list[str]:
    """3-letter codes to evaluate: language sets (paper14, xtreme36), codes, or (default) every
    language that has files in ``data``. Pairs of one language (a TSV file, or two line-aligned
    files ``data = (xx file, English file)``) take ``requested``'s one code, else the xx file's
    name (``de.txt``: deu)."""
    if not isinstance(data, str) or Path(data).is_file():
        return [_one_language(requested, data)]
    if not requested:
        if data.startswith("hf:"):
            return [TATOEBA_CODES[x] for x in XTREME_36]
        if not Path(data).is_dir():
            raise EvalDataError(f"{data}: no such file or directory; expected a directory of LASER files "
                                "(tatoeba.xxx-eng.xxx and .eng), a TSV file of xx<TAB>en lines, or hf:NAME")
        found = sorted({p.name.split(".")[1].split("-")[0] for p in Path(data).glob("tatoeba.*-eng.eng")})
        if not found:
            raise EvalDataError(f"{data}: a directory without tatoeba.xxx-eng.eng files; expected LASER-format "
                                "Tatoeba data (or give a TSV file, or --src and --tgt)")
        return found
    codes: list[str] = []
    for item in requested:
        for language in LANGUAGE_SETS.get(item, [item]):
            code = tatoeba_code(language)
            if code not in codes:
                codes.append(code)
    return codes


def _one_language(requested: Sequence[str] | None, data: PairData) -> str:
    """The language of a one-language pair input: ``--langs`` (one code), else the xx file's name."""
    if requested:
        if len(requested) != 1 or requested[0] in LANGUAGE_SETS:
            raise EvalDataError(f"--langs {' '.join(requested)}: a TSV file or --src/--tgt holds one language; name it alone")
        return tatoeba_code(requested[0])
    name = pair_file(data).name.split(".")[0]
    try:
        return tatoeba_code(name)
    except EvalDataError:
        raise EvalDataError(f"{name}: not a language code; name the pairs' language with --langs (de or deu)") from None


def pair_file(data: PairData) -> Path:
    """The file that names a one-language input's language (a TSV, records, the xx file)."""
    return data.path if isinstance(data, RecordPairs) else Path(data) if isinstance(data, str) else data[0]


def load_pairs(data: PairData, code: str, max_length: int = 512, cut_lines: dict[str, int] | None = None) -> tuple[list[str], list[str]]:
    """(xx sentences, English sentences), aligned line by line, from ``data``: a directory of
    LASER files, ``hf:NAME``, a TSV file (``xx<TAB>en`` lines; a first line naming the columns
    is passed over), two line-aligned files or the fields of records. ``cut_lines`` (if given)
    receives ``{file: lines cut}`` for files with lines longer than ``max_length`` tokens can
    reach."""
    if isinstance(data, RecordPairs):
        return data.load()
    if isinstance(data, tuple):
        xx_path, en_path = data
    elif data.startswith("hf:"):
        return _load_hf(data[3:], code)
    elif Path(data).is_file():
        return _tsv_pairs(Path(data), code, cut_lines, max_length)
    else:
        xx_path, en_path = Path(data) / f"tatoeba.{code}-eng.{code}", Path(data) / f"tatoeba.{code}-eng.eng"
    expected = "a file of one sentence a line, line i translating line i of its twin"
    xx, en = read_lines(xx_path, expected, cut_lines, max_length), read_lines(en_path, expected, cut_lines, max_length)
    if len(xx) != len(en):
        raise EvalDataError(f"{xx_path} has {len(xx)} lines but {en_path} has {len(en)}; expected aligned files")
    return xx, en


def _tsv_pairs(path: Path, code: str, cut_lines: dict[str, int] | None, max_length: int) -> tuple[list[str], list[str]]:
    lines = read_lines(path, "a TSV file of xx<TAB>en lines", cut_lines, max_length)
    first = 2 if lines and is_header(lines[0], (code, "eng", "en", code[:2])) else 1
    xx, en = [], []
    for number, line in enumerate(lines[first - 1 :], start=first):
        columns = line.split("\t")
        if len(columns) != 2:
            raise EvalDataError(f"{path}:{number}: {len(columns)} tab-separated columns; expected 2 (xx<TAB>en)")
        xx.append(columns[0])
        en.append(columns[1])
    return xx, en


def _load_hf(name: str, code: str) -> tuple[list[str], list[str]]:
    """The Hugging Face ``xtreme`` schema: config ``tatoeba.{code}``, source_sentence / target_sentence."""
    dataset = HubDataset(name, f"tatoeba.{code}", "validation", spec=f"hf:{name}")
    split = load_hub_dataset(dataset, streaming=False, error=EvalDataError)  # as prepare loads hf: inputs
    return list(split["source_sentence"]), list(split["target_sentence"])


def evaluate_tatoeba(
    encoder: Encoder,
    tokenizer: Tokenizer,
    data: PairData,
    languages: Sequence[str],
    layers: Sequence[int],
    *,
    pooling: str = "mean",
    batch_size: int = 64,
    max_length: int = 512,
    progress: bool = False,
    vectors: dict | None = None,
) -> dict:
    """Top-1 accuracy per language, both directions, at each layer. An English sentence that
    several languages' files hold (a multi-parallel set) is embedded once for all of them.
    ``vectors``, if given, receives what was embedded, for a caller that scores the same
    sentences again (the demo mines them): ``{code: (xx {layer: (n, d)}, en {layer: (n, d)})}``.

    Returns {"pooling", "layers": {layer: {"layer", "pooling", "languages": {code: {"xx2en",
    "en2xx", "n"}}, "average": {"xx2en", "en2xx"}}}, "cut_lines": {file: lines cut before
    tokenizing}} (files with lines longer than ``max_length`` tokens can reach).
    """
    cut_lines: dict[str, int] = {}
    pairs = {code: load_pairs(data, code, max_length, cut_lines) for code in languages}
    kwargs = dict(pooling=pooling, batch_size=batch_size, max_length=max_length, progress=progress)
    # English sentences that several languages' files hold (a multi-parallel set, where every
    # language translates the same English) are embedded once: {sentence: row of `shared`}.
    counts = Counter(sentence for _, en in pairs.values() for sentence in set(en))
    shared_rows = {sentence: row for row, sentence in enumerate(s for s, n in counts.items() if n > 1)}
    shared = embed_layers(encoder, tokenizer, list(shared_rows), layers, desc="eng (shared)", **kwargs) if shared_rows else {}
    per_layer: dict[int, dict] = {k: {} for k in layers}
    for i, (code, (xx, en)) in enumerate(pairs.items(), start=1):
        pair = f"{code}-eng ({i}/{len(languages)})"  # each bar says what it embeds: "deu-eng (1/3): deu"
        xx_vectors = embed_layers(encoder, tokenizer, xx, layers, desc=f"{pair}: {code}", **kwargs)
        en_vectors = _english_vectors(encoder, tokenizer, en, layers, shared_rows, shared, desc=f"{pair}: eng", **kwargs)
        for k in layers:
            per_layer[k][code] = {**retrieval_accuracy(xx_vectors[k], en_vectors[k]), "n": len(xx)}
        if vectors is not None:
            vectors[code] = (xx_vectors, en_vectors)
    result = {"pooling": pooling, "layers": {}, "cut_lines": cut_lines}
    for k, scores in per_layer.items():
        average = {d: float(np.mean([s[d] for s in scores.values()])) for d in ("xx2en", "en2xx")}
        result["layers"][k] = {"layer": k, "pooling": pooling, "languages": scores, "average": average}
    return result


def _english_vectors(
    encoder: Encoder, tokenizer: Tokenizer, en: list[str], layers: Sequence[int],
    shared_rows: dict[str, int], shared: dict[int, np.ndarray], *, desc: str, **kwargs,
) -> dict[int, np.ndarray]:
    """{layer: (len(en), d)}: the rows of ``shared`` for its sentences, the rest embedded here."""
    own = [i for i, sentence in enumerate(en) if sentence not in shared_rows]
    if len(own) == len(en):
        return embed_layers(encoder, tokenizer, en, layers, desc=desc, **kwargs)
    embedded = embed_layers(encoder, tokenizer, [en[i] for i in own], layers, desc=desc, **kwargs) if own else {}
    from_shared = [i for i, sentence in enumerate(en) if sentence in shared_rows]
    rows = [shared_rows[en[i]] for i in from_shared]
    vectors = {}
    for k in layers:
        v = np.empty((len(en), shared[k].shape[1]), dtype=np.float32)
        v[from_shared] = shared[k][rows]
        if own:
            v[own] = embedded[k]
        vectors[k] = v
    return vectors
