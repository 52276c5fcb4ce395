"""Retrieval quality and ingestion time against the two knobs of the knowledge base.

    python bench/kb_sweep.py [--tokens 32 48 64 128] [--sizes 1200 2000]

For each (word pieces embedded per chunk, chunk size in characters): a new store in this
process (the model already loaded, no primer), the corpus ingested and timed, then
recall@5 and MRR@5 of dense, keyword and hybrid retrieval on bench/kb_questions.yml.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import save  # noqa: E402
from bench.kb_bench import DEFAULT_CORPUS, QUESTIONS, embedder_speed, load_questions, quality  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--tokens", type=int, nargs="+", default=[32, 48, 64, 128])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1200, 2000])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    from knowledge import KnowledgeBase
    from knowledge.embedding import get_embedder

    get_embedder().embed(["load the model before timing"])
    questions = load_questions(QUESTIONS)
    rows = []
    for size in args.sizes:
        for tokens in args.tokens:
            with tempfile.TemporaryDirectory(prefix="kb-sweep-") as tmp:
                kb = KnowledgeBase(
                    tmp, primer=False, doc_max_tokens=tokens, chunk_size=size, chunk_overlap=size // 10
                )
                started = time.perf_counter()
                kb.ingest([args.corpus])
                seconds = time.perf_counter() - started
                row = {
                    "doc_max_tokens": tokens,
                    "chunk_size": size,
                    "chunks": kb.literature.count(),
                    "ingest_s": round(seconds, 2),
                    "loadavg": os.getloadavg()[0],
                    "embedder_tokens_per_s": embedder_speed(kb),
                }
                for mode in ("dense", "keyword", "hybrid"):
                    q = quality(kb, questions, mode)
                    row[mode] = {"recall_at_5": q["recall_at_5"], "mrr_at_5": q["mrr_at_5"]}
                rows.append(row)
                print(
                    f"tokens {tokens:4} size {size:5} chunks {row['chunks']:4} ingest {seconds:5.1f} s  "
                    + "  ".join(
                        f"{m} {row[m]['recall_at_5']:.3f}/{row[m]['mrr_at_5']:.3f}"
                        for m in ("dense", "keyword", "hybrid")
                    ),
                    flush=True,
                )
    if not args.no_save:
        print("saved", save("kb_sweep", {"corpus": str(args.corpus), "rows": rows}))


if __name__ == "__main__":
    main()
