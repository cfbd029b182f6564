"""Throughput of infoxlm's sentence embeddings against the same embeddings computed with
Hugging Face transformers, on real multilingual sentences.

Both sides load one model directory (written by ``Encoder.save_pretrained`` with XLM-R's
real 250,002-piece tokenizer and freshly initialised weights of the chosen shape, so nothing
is downloaded) and embed the same sentences, mean-pooled at each asked layer:

- infoxlm: ``embed_layers`` (what ``infoxlm embed`` and the Tatoeba evaluation run): the
  sentences sorted by length before batching, the encoder stopped at the layer asked for;
- baseline: ``AutoTokenizer`` + ``AutoModel`` with their defaults, the sentences batched in
  the order given, ``output_hidden_states=True`` (every layer runs), the same mean pooling.

The two must agree (largest difference of any vector component under 1e-3, as fp32 rounding
allows) before any time counts. Sentences: the Tatoeba test sets shipped with the demo
corpus, both sides of the pairs, the languages in turn. Each side
runs ``--repeat`` times per layer, alternating; the best and the median run are reported.

    python benchmarks/embedding_throughput.py                       # BENCHMARKS.md: base, layers 8 and 12
    python benchmarks/embedding_throughput.py --encoder tiny --sentences 60 --repeat 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from infoxlm.bench.sizes import SIZES
from infoxlm.demo import corpus
from infoxlm.embedding import embed_layers, pool
from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Encoder
from infoxlm.tokenizer import Tokenizer

from xlmr_assets import xlmr_tokenizer_dir

AGREEMENT = 1e-3  # largest |infoxlm − baseline| allowed in any vector component
# Encoder shape → the layer XLCO contrasts in the bench sizes (8 of 12 at base, 12 of 24 at large).
UNIVERSAL_LAYER = {size.encoder: size.contrast_layer for size in SIZES.values()}


def tatoeba_sentences(count: int) -> list[str]:
    """``count`` distinct sentences from the shipped Tatoeba test sets, both sides of the
    pairs, taken from the languages in turn (so the input order mixes scripts and lengths; a
    small set, such as Urdu's 25 pairs, drops out when it runs dry). English sentences recur
    across the sets; each is taken once."""
    streams = [
        iter([s for pair in zip(*corpus.retrieval_pairs(lang, "test")) for s in pair])
        for lang in corpus.retrieval_languages("test")
    ]
    seen: set[str] = set()
    sentences: list[str] = []
    while streams and len(sentences) < count:
        for stream in list(streams):
            sentence = next((s for s in stream if s not in seen), None)
            if sentence is None:
                streams.remove(stream)
            elif len(sentences) < count:
                seen.add(sentence)
                sentences.append(sentence)
    return sentences


def write_model(directory: Path, size: str, seed: int = 0) -> Tokenizer:
    """A fresh encoder of the ``size`` shape with XLM-R's tokenizer, saved as a transformers
    ``XLMRobertaModel`` directory."""
    tokenizer = Tokenizer.from_pretrained(xlmr_tokenizer_dir())
    torch.manual_seed(seed)
    encoder = Encoder(EncoderConfig.of_size(size, vocab_size=tokenizer.vocab_size))
    encoder.save_pretrained(directory, tokenizer, include_mlm_head=False)
    return tokenizer


def infoxlm_embedder(directory: Path, sentences: list[str], batch_size: int) -> Callable[[int], np.ndarray]:
    """Loads the model once; the returned function embeds ``sentences`` at a layer."""
    encoder = Encoder.from_pretrained(directory)
    tokenizer = Tokenizer.from_pretrained(directory)
    return lambda layer: embed_layers(encoder, tokenizer, sentences, [layer], batch_size=batch_size)[layer]


def baseline_embedder(directory: Path, sentences: list[str], batch_size: int) -> Callable[[int], np.ndarray]:
    """The same with transformers, loaded once: input order, every layer run, mean pooling."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModel.from_pretrained(directory).eval()

    @torch.no_grad()
    def embed(layer: int) -> np.ndarray:
        vectors = []
        for start in range(0, len(sentences), batch_size):
            batch = tokenizer(
                sentences[start : start + batch_size], padding=True, truncation=True, max_length=512, return_tensors="pt"
            )
            hidden = model(**batch, output_hidden_states=True).hidden_states[layer]  # (b, T, d)
            vectors.append(pool(hidden, batch["attention_mask"], "mean").numpy())
        return np.concatenate(vectors)

    return embed


def timed(run: Callable[[], np.ndarray]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure_layer(
    sides: dict[str, Callable[[int], np.ndarray]], layer: int, sentences: int, tokens: int, repeat: int
) -> dict:
    """Time each side (``infoxlm``, optionally ``baseline``) at one layer, alternating, ``repeat``
    runs each, after a warm-up run of each whose embeddings must agree."""
    vectors = {name: embed(layer) for name, embed in sides.items()}
    entry: dict = {"layer": layer}
    baseline = "baseline" in sides
    if baseline:
        difference = float(np.abs(vectors["infoxlm"] - vectors["baseline"]).max())
        if not difference < AGREEMENT:
            raise SystemExit(
                f"layer {layer}: infoxlm's and the baseline's embeddings differ by {difference:.3g} "
                f"(expected < {AGREEMENT}); no time counts"
            )
        entry["max_abs_difference"] = difference
    walls: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeat):
        for name, embed in sides.items():
            walls[name].append(timed(lambda: embed(layer)))
    for name, measured in walls.items():
        best, median = min(measured), statistics.median(measured)
        entry[name] = {
            "wall_seconds": measured,
            "sentences_per_s": sentences / best,
            "tokens_per_s": tokens / best,
            "median_sentences_per_s": sentences / median,
        }
    if baseline:
        entry["speedup"] = min(walls["baseline"]) / min(walls["infoxlm"])
        entry["speedup_median"] = statistics.median(walls["baseline"]) / statistics.median(walls["infoxlm"])
    return entry


def parse_layers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated layer numbers such as 8,12") from None


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="base", choices=UNIVERSAL_LAYER, help="encoder shape (default: base, XLM-R base)")
    parser.add_argument(
        "--layers",
        type=parse_layers,
        default=None,
        help="layers to pool, e.g. 8,12 (default: the universal layer of the bench sizes and the last)",
    )
    parser.add_argument(
        "--sentences", type=int, default=560, help="sentences to embed, from the 14 languages in turn (default: 560)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass, both sides (default: 32)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side per layer, alternating (default: 3)")
    parser.add_argument("--no-baseline", action="store_true", help="time infoxlm alone (no transformers needed)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    for option in ("sentences", "batch_size", "repeat"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} {getattr(args, option)}: expected a positive number")

    num_layers = EncoderConfig.of_size(args.encoder, vocab_size=8).num_hidden_layers
    layers = args.layers or sorted({UNIVERSAL_LAYER[args.encoder], num_layers})
    for layer in layers:
        if not 0 <= layer <= num_layers:
            parser.error(f"--layers {layer}: the {args.encoder} encoder has layers 0 … {num_layers}")
    sentences = tatoeba_sentences(args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        tokenizer = write_model(directory, args.encoder)
        tokens = sum(len(ids) for ids in tokenizer.encode_batch(sentences))
        sides = {"infoxlm": infoxlm_embedder(directory, sentences, args.batch_size)}
        if not args.no_baseline:
            sides["baseline"] = baseline_embedder(directory, sentences, args.batch_size)
        results = [measure_layer(sides, layer, len(sentences), tokens, args.repeat) for layer in layers]

    figures = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads",
        "encoder": args.encoder,
        "sentences": len(sentences),
        "tokens": tokens,
        "batch_size": args.batch_size,
        "layers": results,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{len(sentences)} sentences, {tokens:,} tokens; {args.encoder} encoder; {figures['machine']}")
        for entry in results:
            line = f"layer {entry['layer']:>2}: infoxlm {entry['infoxlm']['sentences_per_s']:7.1f} sentences/s"
            if "baseline" in entry:
                line += (
                    f", baseline {entry['baseline']['sentences_per_s']:7.1f} → {entry['speedup']:.2f}× "
                    f"(median {entry['speedup_median']:.2f}×; vectors agree to {entry['max_abs_difference']:.1e})"
                )
            print(line)
    return figures


if __name__ == "__main__":
    main()
