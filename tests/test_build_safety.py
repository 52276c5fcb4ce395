"""Builds of candidate source run on the trusted side (the judge, static reports): their flags
are allow-listed, the compiler runs in a sandbox of its own, and no process started for a
candidate sees a secret (sandbox/native.py, sandbox/judge/isolation.py, sandbox/safe_env.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox import hip, native
from sandbox.judge import isolation
from sandbox.safe_env import safe_env

RUNS_OR_WRITES = [
    ("cpp", ["-wrapper", "/bin/sh,-c,id"]), ("cpp", ["-B/tmp/tools/"]), ("cpp", ["-fplugin=/tmp/p.so"]),
    ("cpp", ["-specs=/tmp/s"]), ("cpp", ["-Wl,-rpath,/tmp"]), ("cpp", ["-Wa,-o,/tmp/x"]), ("cpp", ["@/tmp/args"]),
    ("cpp", ["-o", "/work/x"]), ("cpp", ["-fprofile-generate=/tmp"]), ("cpp", ["-fdump-tree-all"]),
    ("cpp", ["-L/tmp"]), ("cpp", ["-include", "/etc/passwd"]), ("cuda", ["-ccbin=/tmp/sh"]),
    ("cuda", ["-Xcompiler", "-wrapper"]), ("cuda", ["--compiler-bindir=/tmp"]), ("cuda", ["-Xptxas", "-v"]),
]


@pytest.mark.parametrize("lang, flags", RUNS_OR_WRITES, ids=[" ".join(f) for _, f in RUNS_OR_WRITES])
def test_flags_that_could_run_or_write_something_are_refused(lang: str, flags: list[str]) -> None:
    with pytest.raises(ValueError, match="is not allowed"):
        native.checked_flags(lang, flags)


def test_flags_that_only_shape_the_code_are_allowed() -> None:
    native.checked_flags("cpp", ["-O3", "-Ofast", "-march=native", "-mavx2", "-mno-fma", "-funroll-loops", "-ffast-math",
                                 "-fopenmp", "-fno-exceptions", "-Wall", "-Wno-unused-variable", "-DTILE=64", "-UNDEBUG",
                                 "-std=c++20", "-lm", "-g", "--param=max-unroll-times=8"])
    native.checked_flags("cuda", ["-O3", "--use_fast_math", "-Xptxas=-v", "-maxrregcount=64", "-lineinfo",
                                  "--expt-relaxed-constexpr", "-DBLOCK=128", "-gencode=arch=compute_90a,code=sm_90a"])


def test_processes_started_for_candidates_see_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-candidates")
    monkeypatch.setenv("KS_LLM_API_KEY", "sk-test-not-for-candidates")
    monkeypatch.setenv("SOME_TOKEN", "t")
    for env in (safe_env(), hip.hip_env()):
        assert "sk-test-not-for-candidates" not in env.values() and "SOME_TOKEN" not in env
        assert env.get("PATH") == os.environ["PATH"]


@pytest.mark.slow
def test_a_sandboxed_compiler_writes_only_its_work_folder(tmp_path: Path) -> None:
    if not isolation.probe().available:
        pytest.skip("bubblewrap cannot make namespaces here")
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    script = f"touch {work}/built; touch {outside} ; touch {Path(__file__).parent}/planted; true"
    subprocess.run(isolation.compiler_command(["sh", "-c", script], work), check=True, capture_output=True, timeout=30)
    assert (work / "built").exists()
    assert not outside.exists() and not (Path(__file__).parent / "planted").exists()
