"""The CPU target's static report: which loops g++ vectorised, mapped to the submission's lines."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox.static_cpu import analyze_cpu_submission, parse_remarks

SUBMISSION = '''from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>
extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
extern "C" void scan(float* a, int64_t n) {
  for (int64_t i = 1; i < n; ++i) a[i] = a[i - 1] * 0.5f + a[i];
}
"""

lib = load_cpp(SOURCE, name="two_loops")
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_report_says_which_loop_vectorised_and_why_the_other_did_not(tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_text(SUBMISSION)
    report = analyze_cpu_submission(path)
    assert report.status == "ok", report.note
    by_line = {loop.line: loop for loop in report.loops}
    # Lines of the Python file: the add loop is on line 6, the scan's carried dependency on line 9.
    assert by_line[6].vectorized and "byte vectors" in by_line[6].detail
    assert not by_line[9].vectorized and by_line[9].detail
    assert report.summary().startswith("vectorisation report") and "line 9: not vectorised" in report.summary()


def test_a_submission_without_native_source_has_no_report(tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_text("def custom_kernel(data):\n    return data[0] + data[1]\n")
    assert analyze_cpu_submission(path).status == "no_source"


def test_remarks_give_one_loop_per_line_vectorised_if_any_version_was() -> None:
    remarks = "\n".join([
        "kernel.cpp:5:21: optimized: loop vectorized using 32 byte vectors",
        "kernel.cpp:5:21: missed: couldn't vectorize loop",  # an epilogue GCC gave up on
        "kernel.cpp:8:21: missed: couldn't vectorize loop",
        "kernel.cpp:8:30: missed: not vectorized: complicated access pattern.",
        "kernel.cpp:8:30: missed: not vectorized: a later reason",
        "kernel.cpp:12:3: missed: statement clobbers memory: foo ();",
    ])
    loops = parse_remarks(remarks)
    assert [(loop.line, loop.vectorized, loop.detail) for loop in loops] == [
        (5, True, "32-byte vectors"), (8, False, "complicated access pattern.")]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_critic_reads_the_vectorisation_report_on_the_cpu(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from graph.experiment import resource_report

    (tmp_path / "kernels").mkdir()
    ctx = SimpleNamespace(config=SimpleNamespace(target="cpu"), run_dir=tmp_path)
    report = resource_report(ctx, SUBMISSION)  # type: ignore[arg-type]
    assert "1 of 2 loops vectorised" in report and "line 6: vectorised" in report
    assert resource_report(ctx, "def custom_kernel(data):\n    return data\n") == ""  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_loops_written_with_intrinsics_are_named_as_vector_code(tmp_path: Path) -> None:
    # GCC's auto-vectoriser calls a hand-written AVX loop "not vectorized"; a model reading that would
    # rewrite vector code it already has (seen in a relay run: "0 of 5 loops vectorised").
    path = tmp_path / "submission.py"
    path.write_text('''SOURCE = r"""
#include <immintrin.h>
#include <cstdint>
extern "C" void twice(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(a + i)));
  }
}
"""
''')
    report = analyze_cpu_submission(path)
    assert report.status == "ok" and report.loops and all(loop.intrinsics for loop in report.loops), report
    assert "written with SIMD intrinsics" in report.summary() and "not vectorised" not in report.summary()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_an_openmp_loop_is_named_by_its_for_line_not_the_statement_under_it() -> None:
    # GCC reports the outlined OpenMP row loop at its body's first statement; the seed's row loop is
    # line 13 of the file (seen in a relay run as "line 14", a `const float*` declaration).
    from sandbox.problem import load_problem

    seed = load_problem("softmax", "cpu").seed_for("cpu")
    report = analyze_cpu_submission(seed)
    lines = seed.read_text().splitlines()
    assert report.status == "ok" and report.loops, report
    assert all(" for (" in lines[loop.line - 1] for loop in report.loops), \
        [(loop.line, lines[loop.line - 1]) for loop in report.loops]
