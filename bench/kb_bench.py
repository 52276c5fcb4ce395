"""Knowledge base: ingestion time, query latency and retrieval quality on the ROCm blogs corpus.

    python bench/kb_bench.py [--corpus ../shared/corpus/rocm-blogs] [--repeats 3]

1. cold: `kb ingest CORPUS` in a new process on an empty store (interpreter start,
   imports, model load, the primer, the corpus and the exit all counted), wall clock;
2. unchanged, new process: the same command again on the filled store;
3. unchanged, in process: `kb.ingest` again in an open store;
4. query latency in process (model loaded): every question, several times, per mode;
5. recall@5 and MRR@5 of dense, keyword and hybrid retrieval on bench/kb_questions.yml
   (a hit: the retrieved chunk's file and innermost section match the expected ones).

The corpus is read in place and never copied. Results go to bench/results/kb_bench.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import save  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "rocm-blogs"
QUESTIONS = Path(__file__).resolve().parent / "kb_questions.yml"


def run_cli_ingest(store: Path, corpus: Path) -> dict[str, Any]:
    """`kernel-scientist kb ingest CORPUS` in a process of its own (the sub-app alone), wall clock."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "knowledge.cli", "ingest", str(corpus), "--store", str(store), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    report = json.loads(out.stdout)
    statuses = [f["status"] for f in report["files"]]
    return {
        "wall_s": round(wall, 3),
        "ingest_phase_s": round(report["seconds"], 3),
        "added": statuses.count("added"),
        "unchanged": statuses.count("unchanged"),
        "failed": statuses.count("failed"),
        "chunks_written": sum(f["chunks"] for f in report["files"] if f["status"] in ("added", "updated")),
    }


def load_questions(path: Path) -> list[dict[str, Any]]:
    items = yaml.safe_load(path.read_text())["questions"]
    for item in items:
        sections = item["section"]
        item["sections"] = [str(s) for s in (sections if isinstance(sections, list) else [sections])]
    return items


def is_match(hit: Any, question: dict[str, Any]) -> bool:
    leaf = hit.section_path[-1] if hit.section_path else ""
    return Path(hit.source).name == question["source"] and leaf in question["sections"]


def quality(kb: Any, questions: list[dict[str, Any]], mode: str, k: int = 5) -> dict[str, Any]:
    found, rr, misses = 0, 0.0, []
    for q in questions:
        hits = kb.search(q["q"], k=k, mode=mode)
        rank = next((i for i, h in enumerate(hits, 1) if is_match(h, q)), None)
        if rank is not None:
            found += 1
            rr += 1.0 / rank
        else:
            misses.append(q["q"])
    n = len(questions)
    return {
        "recall_at_5": round(found / n, 4),
        "mrr_at_5": round(rr / n, 4),
        "found": found,
        "questions": n,
        "misses": misses,
    }


def latency(kb: Any, questions: list[dict[str, Any]], mode: str, repeats: int) -> dict[str, float]:
    kb.search("warm-up query", k=5, mode=mode)
    times = []
    for _ in range(repeats):
        for q in questions:
            t = time.perf_counter()
            kb.search(q["q"], k=5, mode=mode)
            times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "queries": len(times),
    }


def embedder_speed(kb: Any) -> float:
    """Word pieces per second of MiniLM right now: how much CPU the machine gave us (it is shared)."""
    texts = [f"calibration text {i} " + "kernel tiles registers memory bandwidth " * 20 for i in range(128)]
    kb.embedder.embed(texts[:8], max_tokens=64)
    started = time.perf_counter()
    kb.embedder.embed(texts, max_tokens=64)
    return round(len(texts) * 64 / (time.perf_counter() - started))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument(
        "--repeats", type=int, default=3, help="cold ingestions, each in a new process and store"
    )
    parser.add_argument("--query-repeats", type=int, default=3)
    parser.add_argument(
        "--doc-tokens",
        type=int,
        default=None,
        help="word pieces embedded per chunk (in-process parts only; the CLI uses the defaults)",
    )
    parser.add_argument("--chunk-size", type=int, default=None, help="as --doc-tokens")
    parser.add_argument(
        "--quality-only", action="store_true", help="skip the timings (one in-process ingestion)"
    )
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    from knowledge.base import DOC_MAX_TOKENS, KnowledgeBase
    from knowledge.chunking import CHUNK_SIZE

    tokens = args.doc_tokens or DOC_MAX_TOKENS
    size = args.chunk_size or CHUNK_SIZE
    if not args.corpus.is_dir():
        sys.exit(f"corpus not found: {args.corpus}")
    questions = load_questions(args.questions)
    results: dict[str, Any] = {
        "corpus": str(args.corpus),
        "doc_max_tokens": tokens,
        "chunk_size": size,
        "loadavg_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        store = Path(tmp) / "store-0"
        if not args.quality_only:
            cold = []
            for r in range(args.repeats):
                store = Path(tmp) / f"store-{r}"
                cold.append(run_cli_ingest(store, args.corpus))
                print(f"cold ingestion {r + 1}: {cold[-1]}", flush=True)
            unchanged_process = [run_cli_ingest(store, args.corpus) for _ in range(args.repeats)]
            print(f"unchanged, new process: {unchanged_process}", flush=True)
            results["cold"] = cold
            results["cold_median_s"] = statistics.median(c["wall_s"] for c in cold)
            results["unchanged_process"] = unchanged_process
            results["unchanged_process_median_s"] = statistics.median(c["wall_s"] for c in unchanged_process)
        kb = KnowledgeBase(store, doc_max_tokens=tokens, chunk_size=size)
        report = kb.ingest([args.corpus])
        results["chunks"] = kb.literature.count()
        if not args.quality_only:
            again = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                report = kb.ingest([args.corpus])
                again.append(time.perf_counter() - t)
            assert report.count("unchanged") == len(report.files), report
            results["unchanged_in_process_s"] = [round(a, 4) for a in again]
            results["unchanged_in_process_median_s"] = statistics.median(again)
            results["latency"] = {
                m: latency(kb, questions, m, args.query_repeats) for m in ("hybrid", "dense", "keyword")
            }
        results["quality"] = {m: quality(kb, questions, m) for m in ("dense", "keyword", "hybrid")}
        results["embedder_tokens_per_s"] = embedder_speed(kb)
    results["loadavg_after"] = os.getloadavg()
    summary = {k: v for k, v in results.items() if k not in ("cold", "unchanged_process", "quality")}
    print(json.dumps(summary, indent=1))
    for mode, q in results["quality"].items():
        print(
            f"{mode:8} recall@5 {q['recall_at_5']:.3f}  MRR@5 {q['mrr_at_5']:.3f}  "
            f"({q['found']}/{q['questions']})"
        )
    if not args.no_save:
        print("saved", save("kb_bench", results))


if __name__ == "__main__":
    main()
