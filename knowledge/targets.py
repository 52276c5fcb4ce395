"""Which hardware a document is about: AMD GPUs, NVIDIA GPUs, CPUs, several, or generic.

A document's tags come from counting hardware-specific terms in it. Counting (not a
single mention) matters: a HIP porting guide names CUDA on every page and is about
both, while an AMD profiling blog that mentions CUDA once is about AMD. A CPU guide
(AVX2 intrinsics, OpenMP, cache lines) is tagged `cpu`, so a CPU kernel's search is not
answered with Hopper's wgmma, nor a GPU kernel's with AVX-512.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from knowledge.models import TARGETS, Target

_AMD = re.compile(
    r"\b(amd|rocm|hip|hipcc|hipify\w*|hipblas\w*|rocblas|rocwmma|miopen|rccl|composable kernels?|ck_tile|"
    r"mi[1-4]\d{2}[a-z]?|instinct|cdna\d?|rdna\d?|gfx\d{3,4}[a-z]?|mfma|v_mfma\w*|wavefronts?|wave64|lds|"
    r"rocprof\w*|omniperf|omnitrace|rocm-smi|amdgpu|[asv]gprs?)\b",
    re.I,
)
_NVIDIA = re.compile(
    r"\b(nvidia|cuda|nvcc|ptx|sass|cublas\w*|cudnn|cutlass|cute|nccl|nvlink|nsight|ncu|nvtx|"
    r"[hab]100|h200|b200|gh200|hopper|ampere|blackwell|volta|sm_?\d{2}a?|warps?|wgmma|hgmma|tma|"
    r"tensor cores?|cooperative groups)\b",
    re.I,
)

_CPU = re.compile(
    r"\b(x86(?:[-_]64)?|amd64|aarch64|arm64|avx\w*|sse\d?\w*|fma3|neon|sve2?|amx\w*|"
    r"_mm\d*_\w+|__m(?:128|256|512)\w*|openmp|omp|pthreads?|hyper-?threads?|hyperthreading|numa|"
    r"cache[- ]lines?|l1d|prefetch\w*|auto-?vectori[sz]\w*|vectori[sz](?:e|es|ed|ing|ation)|"
    r"xeon|epyc|ryzen|zen\d?|skylake|ice ?lake|sapphire rapids|graviton|neoverse)\b",
    re.I,
)

# Part of every file's ingest fingerprint: a change of the rules re-tags a file when it is next ingested.
TAGGER_VERSION = "2"  # 2: the cpu tag

MIN_MENTIONS = 3
MIN_SHARE = 0.25


def infer_targets(text: str) -> list[Target]:
    counts: dict[Target, int] = {
        "amd": len(_AMD.findall(text)),
        "nvidia": len(_NVIDIA.findall(text)),
        "cpu": len(_CPU.findall(text)),
    }
    total = sum(counts.values())
    tags: list[Target] = [t for t, n in counts.items() if n >= MIN_MENTIONS and n >= MIN_SHARE * total]
    return tags or ["generic"]


def parse_targets(value: str | Iterable[str] | None) -> list[Target] | None:
    """Normalise a user's override ('amd', 'amd,nvidia', ['cpu']); None keeps inference."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    tags: list[Target] = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if name not in TARGETS:
            raise ValueError(f"unknown target {item!r}: expected one of {', '.join(TARGETS)}")
        if name not in tags:
            tags.append(name)  # type: ignore[arg-type]
    if "generic" in tags and len(tags) > 1:
        raise ValueError("'generic' cannot be combined with a vendor target")
    return tags or None


def target_metadata(tags: list[Target]) -> dict[str, bool | str]:
    """Booleans filter well in Chroma (no list metadata needed); the string is for display."""
    meta: dict[str, bool | str] = {f"target_{t}": t in tags for t in TARGETS}
    meta["targets"] = ",".join(tags)
    return meta


def target_where(target: str | None) -> dict | None:
    """A Chroma filter: a target (amd, nvidia, cpu) matches its own documents and generic ones."""
    if target is None:
        return None
    tags = parse_targets(target)
    if not tags:
        return None
    if len(tags) > 1:
        raise ValueError("filter by one target at a time")
    tag = tags[0]
    if tag == "generic":
        return {"target_generic": True}
    return {"$or": [{f"target_{tag}": True}, {"target_generic": True}]}


def matches_target(meta: dict, target: str | None) -> bool:
    """The same rule as target_where, on metadata already in memory."""
    if target is None:
        return True
    if target == "generic":
        return bool(meta.get("target_generic"))
    return bool(meta.get(f"target_{target}") or meta.get("target_generic"))
