"""How long the demo's mining row takes for one model, at the full demo's sizes.

The row (demo/mining_row.py) reuses the split vectors the retrieval evaluation made, so its own
cost is embedding the monolingual sentences (as many per language as the held-out split has
pairs, twice that many English ones, once per model) and mining 13 small sets twice. This
times exactly that, with the shipped checkpoint (the demo models' size: 4 × 256) at layer 3,
the split vectors made beforehand and not timed.

    python benchmarks/demo_mining.py            # all 13 held-out languages, as `infoxlm demo`
    python benchmarks/demo_mining.py --langs de fr zh
    python benchmarks/demo_mining.py --random-splits   # the time only: split vectors drawn at random
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from infoxlm.demo import corpus
from infoxlm.demo.checkpoint import checkpoint_dir
from infoxlm.demo.mining_row import evaluate_mining
from infoxlm.embedding import embed_layers
from infoxlm.model.encoder import Encoder
from infoxlm.model.fast_paths import FastPaths
from infoxlm.tokenizer import Tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langs", nargs="+", default=None, help="two-letter codes (default: every held-out language)")
    parser.add_argument("--layer", type=int, default=3)
    parser.add_argument("--random-splits", action="store_true",
                        help="random split vectors instead of embedded ones: the same timed work in minutes less (F1 meaningless)")
    args = parser.parse_args()
    model = checkpoint_dir()
    encoder = Encoder.from_pretrained(model, fast_paths=FastPaths.inference()).eval()
    tokenizer = Tokenizer.from_pretrained(model)
    langs = args.langs or corpus.retrieval_languages("heldout")
    splits, generator = {}, torch.Generator().manual_seed(0)
    for split in ("dev", "heldout"):
        splits[split] = {}
        for lang in langs:
            xx, en = corpus.retrieval_pairs(lang, split)
            if args.random_splits:
                vectors = torch.randn(len(xx) + len(en), encoder.config.hidden_size, generator=generator).numpy()
            else:
                vectors = embed_layers(encoder, tokenizer, xx + en, [args.layer])[args.layer]
            splits[split][corpus.tatoeba_code(lang)] = (xx, en, vectors[: len(xx)], vectors[len(xx) :])
    start = time.perf_counter()
    result = evaluate_mining(encoder, tokenizer, args.layer, splits["dev"], splits["heldout"], "dev")
    seconds = time.perf_counter() - start
    print(json.dumps({"languages": len(langs), "threads": torch.get_num_threads(), "seconds": round(seconds, 2),
                      "f1": round(result["average"]["f1"], 1)}))


if __name__ == "__main__":
    main()
