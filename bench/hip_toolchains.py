"""Static reports of every bundled HIP seed from both MI300 compilers: hipcc (Debian's: gfx940; ROCm 6's:
gfx942) and clang-19 (gfx942). Prints a Markdown table for docs/MI300.md; needs both compilers (scripts/setup.sh)."""

from __future__ import annotations

import sys

from sandbox import hip
from sandbox.problem import bundled_problems, load_problem
from sandbox.static_analysis import analyze_submission


def row(problem: str, kernel: str, old: object, new: object) -> str:
    def cell(field: str) -> str:
        a, b = getattr(old, field), getattr(new, field)
        return f"{a}" if a == b else f"**{a} → {b}**"

    return "| " + " | ".join([problem, kernel] + [cell(f) for f in ("vgprs", "sgprs", "shared_bytes", "scratch_bytes",
                                                                    "occupancy", "instruction_count")]) + " |"


def main() -> int:
    clang, why_clang = hip.clang_toolchain()
    hipcc, why_hipcc = hip.hipcc_toolchain()
    if clang is None or hipcc is None:
        print(why_clang or why_hipcc, file=sys.stderr)
        return 1
    # Debian's hipcc compiles for gfx940; a ROCm 6 hipcc (on an MI300 host) for gfx942 itself.
    print(f"{hipcc.arch}: {hipcc.label}; {clang.arch}: {clang.label}\n")
    print("| problem | kernel | VGPRs | SGPRs | LDS bytes | scratch | waves/SIMD | instructions |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, path in bundled_problems().items():
        spec = load_problem(path)
        if "hip" not in spec.seeds:
            continue
        old, new = (analyze_submission(spec.seed_for("hip"), "hip", toolchain=t, use_cache=False) for t in (hipcc, clang))
        if not (old.ok and new.ok):
            print(f"| {name} | failed: {old.status} / {new.status} |")
            continue
        for a, b in zip(old.kernels, new.kernels, strict=True):
            print(row(name, (a.demangled or a.name).split("(")[0], a, b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
