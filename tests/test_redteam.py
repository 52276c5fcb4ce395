"""The red-team set on the CPU target: every cheat is stopped with a reason, every unusual but
legitimate kernel passes, and nothing a candidate plants reaches the next one.

Each class of issue 13 has kernels of its own in tests/adversarial/ (rt_<class>_*.py, and the
older files); docs/INTEGRITY.md says how each class is stopped. Evaluations start a judge and a
runner each, so the module is marked slow.
"""

from __future__ import annotations

import glob
import hashlib
import os
import statistics
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
from sandbox.judge import isolation
from sandbox.judge.bound import cores
from sandbox.judge.evaluation import RECIPE_ON_CPU
from sandbox.judge.session import READ_OUTPUTS
from sandbox.verdict import Status, Verdict

pytestmark = pytest.mark.slow

ADV = Path(__file__).parent / "adversarial"
ROOT = Path(__file__).resolve().parent.parent
FAST = {"budget_s": 0.15, "warmup_s": 0.0, "min_reps": 12}
CAUGHT = {Status.wrong_output, Status.rejected}


def _evaluate(problem: str, name: str, mode: str = "full") -> Verdict:
    path = ADV / f"{name}.py" if "/" not in name else ROOT / name
    return evaluate(problem, path, EvalOptions(target="cpu", mode=mode, timing=FAST,
                                               limits=PhaseLimits(build=300, check=120, time=120)))


def _detail(verdict: Verdict) -> str:
    rule = verdict.integrity.violation.rule if verdict.integrity.violation else "-"
    return f"{verdict.status.value} [{rule}] {verdict.message[:300]} | {' | '.join(verdict.errors)[-600:]}"


# (class, problem, kernel, mode, statuses, rule the violation must name, or None for a wrong output)
CHEATS = [
    # 1. reaching the judge in-process: nothing of it is in the runner's process
    ("inproc", "softmax", "rt_inproc_patch_compare", "check", {Status.wrong_output}, None),
    ("inproc", "softmax", "rt_inproc_gc_expected", "check", {Status.wrong_output}, None),
    ("inproc", "softmax", "rt_inproc_trace_checker", "check", {Status.wrong_output}, None),
    ("inproc", "softmax", "rt_inproc_hidden_exec", "check", {Status.wrong_output}, None),
    ("inproc", "vector_add", "patch_timer_hidden", "full", {Status.ok, Status.rejected}, None),
    ("inproc", "softmax", "read_reference_memory", "check", {Status.wrong_output, Status.runtime_error}, None),
    ("inproc", "vector_add", "call_reference_hidden", "check", {Status.runtime_error, Status.rejected}, None),
    # 2. forging the result channel: the runner answers requests; the judge decides
    ("channel", "softmax", "rt_channel_fake_done_exit", "full", {Status.crash, Status.rejected}, None),
    ("channel", "softmax", "rt_channel_json_line", "full", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_huge_output_spec", "check", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_unreadable_tree", "check", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_nested_json", "check", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_output_unmapped", "check", {Status.rejected}, "protocol"),
    # ... a description the judge would read 32 TiB for, or 70,000 copies of: one budget per output
    ("channel", "softmax", "rt_channel_output_read_amplified", "full", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_output_many_leaves", "full", {Status.rejected}, "protocol"),
    ("channel", "softmax", "rt_channel_output_sparse_hole", "check", {Status.rejected}, "protocol"),
    # ... and helpers that continue the stopped runner while its outputs are read: stopped until all are
    # (their spinning is CPU the judge sees too: `timing-contradicted` in a timed batch, `work-after-return` after)
    # (if the judge's stop lands after the helpers' thread has filled the output in, as on a loaded host,
    # the answer is right and `ok` stands with the judge's clock as its figure: one call of a batch at most)
    ("channel", "softmax", "rt_channel_sigcont_helpers", "full", {Status.rejected, Status.ok},
     ("timed-output-wrong", "protocol", "timing-contradicted", "work-after-return")),
    ("channel", "softmax", "rt_channel_patch_oncall", "full", {Status.rejected}, "timing-contradicted"),
    # (on a host noisy enough that the bound allows its report, `ok` with the judge's clock as its figure)
    ("channel", "softmax", "rt_channel_zero_copy_underreport", "full", {Status.rejected, Status.ok},
     "timing-contradicted"),
    # ... and the second calibration, run beside the candidate's code, can only tighten the bound
    ("channel", "softmax", "rt_channel_recalibration_overreport", "full", {Status.rejected}, "timing-impossible"),
    # ... and breaking it fails the kernel's timing rather than leaving the first calibration in force
    ("channel", "vector_add", "rt_channel_noop_broken_after_load", "full", {Status.runtime_error}, None),
    # 3. cheating only where nobody looks: every call looks the same, the checked ones are drawn after
    ("nolook", "softmax", "rt_nolook_first_n", "full", CAUGHT, None),
    ("nolook", "softmax", "rt_nolook_every_k", "full", CAUGHT, None),
    ("nolook", "softmax", "rt_nolook_timing_gap", "full", CAUGHT, None),
    ("nolook", "softmax", "rt_nolook_big_shapes", "full", CAUGHT, None),
    ("nolook", "vector_add", "mutate_inputs", "check", {Status.rejected}, "input-mutation"),
    ("nolook", "vector_add", "rt_nolook_mutate_when_timed", "full", {Status.rejected}, "input-mutation"),
    # garbage only in a fresh runner, which the check phase never called (its timed calls are checked)
    ("nolook", "vector_add", "rt_renewal_unchecked_runner", "full", {Status.rejected, Status.ok},
     ("timed-output-wrong", "timing-contradicted")),
    # Caught in the check phase when the thread is late there (wrong output), else as work after return.
    ("channel", "vector_add", "rt_channel_background_thread", "full", {Status.rejected, Status.wrong_output}, None),
    ("channel", "vector_add", "rt_channel_background_pool", "full", {Status.rejected, Status.wrong_output}, None),
    ("channel", "vector_add", "rt_channel_background_fork", "full", {Status.rejected, Status.wrong_output}, None),
    # ... and by helper processes: every process of the runner's sandbox is on the judge's books
    ("channel", "vector_add", "rt_channel_helper_process", "full", {Status.rejected, Status.wrong_output}, None),
    ("channel", "vector_add", "rt_channel_orphan_helper", "full", {Status.rejected, Status.wrong_output}, None),
    ("channel", "vector_add", "rt_channel_autoreaped_clone", "full", {Status.rejected, Status.wrong_output}, None),
    # 4. remembering answers: every timed call gets contents no earlier call had
    ("memo", "softmax", "rt_memo_pointer", "full", CAUGHT, None),
    ("memo", "softmax", "rt_memo_sampled", "full", CAUGHT, None),
    ("memo", "softmax", "rt_memo_disk", "full", CAUGHT, None),
    ("memo", "vector_add", "cache_by_pointer", "full", CAUGHT, None),
    ("memo", "vector_add", "cache_by_shape", "full", CAUGHT, None),
    ("memo", "vector_add", "cache_global", "full", CAUGHT, None),
    # 5. library calls, seen from outside the runner in what actually ran
    ("library", "softmax", "rt_library_getattr_softmax", "full", {Status.rejected}, "forbidden-op"),
    ("library", "softmax", "rt_library_softmax_in_thread", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_addbmm", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_einsum_hidden", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_numpy_matmul", "full", {Status.rejected}, "forbidden-op"),
    # numpy's add only in the runner whose timing is contradicted, honest in the fresh one that replaces it
    ("library", "vector_add", "rt_renewal_forbidden_first_runner", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_ctypes_openblas", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_thread", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_fork", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_tmpcopy_openblas", "full", {Status.rejected}, "forbidden-op"),
    # library code known by its bytes: a copy with its names rewritten, machine code pasted into the build
    ("library", "matmul_bf16", "rt_library_renamed_copy", "full", {Status.rejected}, "forbidden-op"),
    ("library", "matmul_bf16", "rt_library_pasted_bytes", "full", {Status.rejected}, "forbidden-op"),
    # a library installed beside the judge whose kernels no symbol names: not in the runner's view
    ("library", "matmul_bf16", "rt_library_unneeded_package", "full", {Status.runtime_error}, None),
    # a copy whose kernels are in its file only while a call runs: written after code was seen running from it
    ("library", "matmul_bf16", "rt_library_toggled_copy", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    # the same in a folder whose name holds a newline, and toggled through a shared writable mapping (round 19)
    ("library", "matmul_bf16", "rt_library_toggled_newline", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    ("library", "matmul_bf16", "rt_library_toggled_shared", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    # library code mapped by a vfork child over the runner's own code (round 20)
    ("library", "matmul_bf16", "rt_library_vfork_mapping", "full", {Status.rejected}, ("forbidden-op", "hidden-code")),
    # the library's code masked by the mappings a forked child made in its own memory (round 21)
    ("library", "matmul_bf16", "rt_library_fork_mask", "full", {Status.rejected}, ("forbidden-op", "hidden-code")),
    # code rewritten in memory, so that no file shows it: the runner may not make written memory executable
    ("library", "matmul_bf16", "rt_library_code_rewritten_in_memory", "full", {Status.runtime_error}, None),
    ("library", "matmul_bf16", "rt_library_memfd_openblas", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    ("library", "matmul_bf16", "rt_library_wiped_sections", "full", {Status.rejected}, None),
    ("library", "vector_add", "rt_library_sum_stack", "full", {Status.rejected}, "forbidden-op"),
    ("library", "vector_add", "rt_library_addcmul", "full", {Status.rejected}, "forbidden-op"),
    ("library", "vector_add", "rt_library_numpy_add", "full", {Status.rejected}, "forbidden-op"),
    ("library", "vector_add", "library_op", "full", {Status.rejected}, "forbidden-op"),
    ("library", "vector_add", "rt_library_numpy_subtract", "full", {Status.rejected}, "forbidden-op"),
    # a helper process started at import is followed: sampling is on before the import starts
    ("library", "softmax", "rt_library_helper_from_import", "full", {Status.rejected}, "forbidden-op"),
    # a loaded library overwritten so it reads as no ELF file is code no one can name
    ("library", "matmul_bf16", "rt_library_elf_magic_wiped", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    # ... and so is a library's image copied into the heap, and a copy whose names were zeroed in place
    # (its copy cannot be made executable in a CPU runner: refused at import)
    ("library", "matmul_bf16", "rt_library_heap_copy", "full", {Status.runtime_error}, None),
    ("library", "matmul_bf16", "rt_library_names_blanked", "full", {Status.rejected}, ("hidden-code", "forbidden-op")),
    # /dev is read-only to the runner (it was an uncapped tmpfs outside the sampler's writable places)
    ("library", "matmul_bf16", "rt_library_dev_copy", "full", {Status.rejected, Status.runtime_error}, None),
    # bf16 matmul runs in oneDNN's JIT code (anonymous memory) as much as in at::native's: either is seen
    ("library", "matmul_bf16", "library_matmul", "full", {Status.rejected}, ("forbidden-op", "hidden-code")),
    # 6. persisting: one evaluation adds a bounded number of libraries, of a bounded size, to the cache
    ("persist", "vector_add", "rt_persist_build_flood", "check", {Status.runtime_error, Status.build_error}, None),
    # ... and no key reaches a keyring (which no namespace separates): the key calls are refused
    ("persist", "vector_add", "rt_persist_keyring", "check", {Status.runtime_error}, None),
    # Memory outside every group and every resident set: the runner may open no TCP socket.
    ("persist", "vector_add", "rt_memory_tcp_park", "check", {Status.runtime_error}, None),
    ("persist", "vector_add", "rt_memory_pipe_park", "check", {Status.runtime_error, Status.resource_limit}, None),
    # 7. the reference is computed and timed by the judge only
    ("reference", "softmax", "rt_reference_zero_softmax", "check", {Status.wrong_output}, None),
    ("reference", "vector_add", "rt_reference_zero_add", "check", {Status.wrong_output}, None),
    # 8. values outside the generator's distribution: each problem's adversarial cases
    ("values", "softmax", "rt_values_softmax_mean", "check", {Status.wrong_output}, None),
    ("values", "softmax", "rt_values_softmax_first", "check", {Status.wrong_output}, None),
    ("values", "rmsnorm", "rt_values_rmsnorm_fp16acc", "check", {Status.wrong_output}, None),
    ("values", "rmsnorm", "rt_values_rmsnorm_no_eps", "check", {Status.wrong_output}, None),
    ("values", "rmsnorm", "rt_values_rmsnorm_bf16_chunks", "check", {Status.wrong_output}, None),
    ("values", "softmax", "rt_values_softmax_ranked_only", "full", {Status.wrong_output}, None),
    ("values", "softmax", "rt_values_generated_rows_only", "full", {Status.wrong_output}, None),
    ("values", "fp8_blockscale_gemm", "rt_values_fp8_small_range", "check", {Status.wrong_output}, None),
    # and the older set: partial or stale outputs
    ("outputs", "softmax", "stale_memory", "check", {Status.wrong_output}, None),
    ("outputs", "softmax", "first_row_only", "check", {Status.wrong_output}, None),
    ("outputs", "vector_add", "constant_output", "check", {Status.wrong_output}, None),
    ("outputs", "softmax", "lower_precision", "check", {Status.wrong_output}, None),
]


@pytest.mark.parametrize("klass, problem, name, mode, statuses, rule", CHEATS, ids=[c[2] for c in CHEATS])
def test_cheat_is_stopped_with_a_reason(klass: str, problem: str, name: str, mode: str, statuses: set[Status],
                                        rule: str | tuple[str, ...] | None) -> None:
    verdict = _evaluate(problem, name, mode)
    if "another build than the one this kernel's addresses are for" in verdict.message:
        pytest.skip("the kernel pastes code from one OpenBLAS build, and this host has another")
    assert verdict.status in statuses, _detail(verdict)
    if verdict.status == Status.ok:  # a patched clock or event in the runner changes nothing the judge uses
        for bench in verdict.benchmarks:  # an accepted report stands only where the judge's clock agrees with it
            assert bench.median_us >= 0.7 * (bench.judge_median_us or 0.0), (bench.shape, bench.judge)
        return
    if rule is not None:
        rules = rule if isinstance(rule, tuple) else (rule,)
        assert verdict.integrity.violation is not None and verdict.integrity.violation.rule in rules, _detail(verdict)
    assert verdict.message, _detail(verdict)


LEGIT = [
    ("softmax", "legit_rt_threadpool"),  # a pool created on the first call, kept alive
    ("softmax", "legit_rt_subclasses"),  # a registry found through __subclasses__
    ("softmax", "legit_rt_numpy_softmax"),
    ("softmax", "legit_rt_torch_compile"),
    ("softmax", "legit_rt_autotune"),  # variants timed on the first call
    ("softmax", "legit_rt_persistent_out"),  # one output buffer, returned by every call
    ("softmax", "legit_rt_ring_interleaved"),  # each output its own slot of a ring interleaved along the last axis
    ("softmax", "legit_rt_pitched_rows"),  # rows 131,072 elements apart: read where they lie, not the whole span
    ("softmax", "legit_rt_prints"),
    ("softmax", "legit_rt_generator"),
    ("softmax", "legit_rt_gc_inspect"),
    ("softmax", "legit_softmax_workspace"),
    ("softmax", "legit_rt_process_pool_lazy"),  # worker processes started on the first call
    ("softmax", "legit_rt_spawn_pool"),  # a "spawn" process pool running the submission's own function
    ("vector_add", "legit_rt_openmp"),
    ("vector_add", "legit_inplace_add"),
    ("rmsnorm", "legit_rt_workspace_rmsnorm"),
    ("rmsnorm", "legit_rt_rmsnorm_torch"),
    ("matmul_bf16", "legit_rt_matmul_blocked"),
    ("matmul_bf16", "legit_rt_matmul_native_threads"),
    ("matmul_bf16", "legit_rt_tempdir_build"),  # built in a temporary folder, deleted once loaded
]


@pytest.mark.parametrize("problem, name", LEGIT, ids=[n for _, n in LEGIT])
def test_unusual_but_legitimate_kernel_passes(problem: str, name: str) -> None:
    verdict = _evaluate(problem, name)
    assert verdict.status == Status.ok, _detail(verdict)
    assert verdict.integrity.violation is None


@pytest.mark.parametrize("name, status", [("rt_library_numpy_matmul", Status.rejected),
                                          ("rt_library_tmpcopy_openblas", Status.rejected),  # a renamed copy
                                          ("legit_rt_matmul_native_threads", Status.ok),
                                          ("problems/matmul_bf16/seeds/cpu.py", Status.ok)])
def test_a_forbidden_library_is_seen_where_perf_samples_nothing(name: str, status: Status,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A GPU host here has no perf: the pages of a forbidden library the runner mapped after the candidate
    # loaded still give the library away (judge/footprint.py), and an honest kernel maps none of them.
    monkeypatch.setenv("KS_LIBWATCH", "off")
    verdict = _evaluate("matmul_bf16", name, "check")
    assert verdict.status == status, _detail(verdict)
    assert "not sampled" in (verdict.integrity.protections or {}).get("library_use", ""), _detail(verdict)
    if status == Status.rejected:
        assert verdict.integrity.violation is not None and verdict.integrity.violation.rule == "forbidden-op"
        assert "mapped into the runner after the candidate loaded" in verdict.message, _detail(verdict)


def test_an_output_written_into_its_place_in_the_arena_gains_nothing() -> None:
    # Red-team rounds 23 and 26: writing the output where the runner would copy it, and then replacing the
    # runner's charge for it, skipped a copy every other kernel's figure held (1.18-1.92 times "faster" than
    # its twin). The judge now reads outputs from the runner's memory: there is no copy left to skip, and
    # the kernel is the twin (the same code, the runner untouched) up to the pairing's noise. The skipped copy
    # showed on the 512x1024 shape (5 of 6 runs "faster" in round 26, 1.33-1.92); the wide shape's ratio is
    # bimodal on this VM even for identical kernels (seen at 1.32 and 1.40 "faster" in whole-suite runs).
    # Identical code on the narrow shape also read 1.32 "faster" once in a whole-suite run (0.89-1.36 in three
    # runs alone): a gain counts only where a second evaluation shows it too, as the skipped copy did in 5 of 6.
    gain_allowed = {"rows=512, cols=1024": 1.3}  # where the skipped copy showed; elsewhere the noise's reach
    said: list[tuple[str, str | None, float | None]] = []
    for _ in range(2):
        verdict = evaluate("softmax", ADV / "rt_channel_output_in_region.py",
                           EvalOptions(target="cpu", timing=FAST,
                                       paired_with=str(ADV / "rt_channel_output_in_region_twin.py")))
        assert verdict.status == Status.ok, _detail(verdict)
        assert verdict.integrity.protections["outputs"] == READ_OUTPUTS, verdict.integrity.protections
        said = [(b.shape, b.paired.difference if b.paired else None, b.paired.ratio if b.paired else None)
                for b in verdict.benchmarks]
        gained = [(shape, ratio) for shape, difference, ratio in said
                  if difference == "faster" and (ratio or 0) >= gain_allowed.get(shape, 1.6)]
        if not gained:
            break
    assert not gained, said
    assert sum(difference == "faster" for _, difference, _ in said) < len(said), said


def test_moving_work_between_the_calls_of_a_batch_gains_nothing() -> None:
    # The kernel computes a whole batch in its last call; the figure is the batch's mean per call.
    deferred = _evaluate("vector_add", "rt_channel_batch_defer")
    honest = _evaluate("vector_add", "problems/vector_add/seeds/cpu.py")
    assert deferred.status == Status.ok == honest.status, _detail(deferred)
    assert deferred.summary.geomean_us is not None and honest.summary.geomean_us is not None
    assert deferred.summary.geomean_us > 0.5 * honest.summary.geomean_us, (deferred.summary, honest.summary)


def test_learning_the_family_of_the_timed_inputs_gains_nothing() -> None:
    # Class 4 by another road. Red-team round 16 learnt the two sets every timed input of the 256^3 matmul
    # was blended from, in its warm-up batch, and answered later calls from products cached for them:
    # 2.9x the honest seed. Round 17 made its first attempt at 128x512x1024 under-report so that it was
    # thrown away, learnt the sets there and answered the second attempt from its cache: about 7x. The
    # sets are drawn anew between batches and as each attempt starts: both give up and compute like the seed.
    learner = _evaluate("matmul_bf16", "rt_memo_blend_family")
    if learner.status == Status.rejected:
        # Its deliberately failed first attempt under-reports; where every attempt reads so (a whole
        # suite's run: 1186 µs reported, 11,621 µs of CPU a call), the bound refuses it outright.
        violation = learner.integrity.violation
        assert violation is not None and violation.rule == "timing-contradicted", _detail(learner)
        return
    honest = _evaluate("matmul_bf16", "problems/matmul_bf16/seeds/cpu.py")
    assert learner.status == Status.ok == honest.status, _detail(learner) + _detail(honest)
    for shape in ("m=256, n=256, k=256", "m=128, n=512, k=1024"):
        learnt, computed = (next(b.median_us for b in v.benchmarks if b.shape == shape) for v in (learner, honest))
        assert learnt > 0.6 * computed, (shape, learnt, computed)


@pytest.mark.parametrize("problem, name", [("vector_add", "rt_channel_underreport_within"),  # 120 µs short
                                           ("softmax", "rt_channel_underreport_softmax"),  # 0.6 of its time
                                           # A fifth of its time: rejected on a quiet host; on a loaded one
                                           # the round trips' noise can hide it, and the judge's clocks
                                           # give the figure (docs/BENCHMARKS.md, the CPU bound on a loaded host).
                                           ("vector_add", "rt_channel_underreport"),
                                           # The same, with every no-op batch slowed once it is loaded,
                                           # against the judge's second calibration.
                                           ("vector_add", "rt_channel_slow_noop_underreport"),
                                           # A fifth of its time, the rest said to be the runner's own work
                                           # outside its batch (the figures a batch now says of itself).
                                           ("vector_add", "rt_channel_forged_batch_steps"),
                                           # Every fifth and sixth no-op batch burns 300 ms, the others
                                           # report 95% of the runner's own time: a 300 ms spread.
                                           ("vector_add", "rt_channel_recalibration_spread"),
                                           # Every call said to take the fastest time of its size, a 1 ms
                                           # sleep in every other one hidden so.
                                           ("vector_add", "rt_channel_underreport_slow_calls")])
def test_a_runner_that_under_reports_inside_the_allowance_gains_nothing(problem: str, name: str) -> None:
    # Beyond the bound's allowance a runner's figure is rejected; inside it (or where the host's noise
    # widens it) it is not, but a batch's figure is never below what the judge's clock saw of it beyond
    # the overhead's noise, nor below the CPU time its runner used (one core's worth where the round trip
    # was as long) beyond the CPU time's own noise, which a loaded host leaves small.
    verdict = _evaluate(problem, name)
    if verdict.status == Status.rejected:
        assert verdict.integrity.violation is not None and verdict.integrity.violation.rule == "timing-contradicted"
        return
    assert verdict.status == Status.ok, _detail(verdict)
    for bench in verdict.benchmarks:
        judge = bench.judge or {}
        assert float(judge.get("spread_us", 0.0)) < 100_000, judge  # the noise allowed is the no-op's, unshaped
        noise = 1.5 * float(judge.get("spread_us", 0.0)) / float(judge.get("batch", 1))
        assert bench.median_us >= (bench.judge_median_us or 0.0) - noise - 1.0, (bench.median_us, bench.judge_median_us, judge)
        if "cpu_per_call_us" in judge:
            worked = [max(min(c, j), c / cores()) for c, j in zip(judge["cpu_per_call_us"], judge["per_call_us"], strict=True)]
            cpu_noise = 1.5 * float(judge["cpu_spread_us"]) / float(judge.get("batch", 1))
            assert bench.median_us >= statistics.median(worked) - cpu_noise - 1.0, (bench.median_us, worked, judge)


def test_a_slowed_reference_does_not_inflate_the_speedup() -> None:
    verdict = _evaluate("softmax", "rt_reference_slow")
    assert verdict.status == Status.ok, _detail(verdict)
    honest = _evaluate("softmax", "problems/softmax/seeds/cpu.py")
    # The kernels' own times swing with the host's load; what the trick aims at is the reference's time,
    # which the judge measures in its own process for both.
    slowed, fair = verdict.summary.reference_geomean_us, honest.summary.reference_geomean_us
    assert slowed is not None and fair is not None
    assert slowed < 2 * fair, (verdict.summary, honest.summary)


def _daemons(marker: str) -> list[str]:
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            text = Path(cmdline).read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "pytest" not in text:
            found.append(text)
    return found


def _contents(folder: Path) -> dict[str, str]:
    """Each file below `folder` and the digest of its bytes."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not isolation.probe().available, reason="no bubblewrap or namespaces here: runners are not isolated")
def test_what_a_candidate_plants_does_not_reach_the_next_one() -> None:
    before = set(glob.glob("/tmp/ks_rt_persist*")) | set(glob.glob("/var/tmp/ks_rt_persist*"))
    _evaluate("vector_add", "problems/vector_add/seeds/cpu.py", "check")  # the judge's records of the host exist
    judges_records = _contents(Path(os.environ["KS_CACHE_DIR"]) / "libcode")
    judges_builds = _contents(Path(os.environ["KS_CACHE_DIR"]) / "triton-judge")
    assert any("libraries-" in path for path in judges_records)
    for name in ("rt_persist_sitecustomize", "rt_persist_buildcache", "rt_persist_tmp", "rt_persist_daemon",
                 "rt_persist_library_list"):
        verdict = _evaluate("vector_add", name, "check")
        assert verdict.status in {Status.ok, Status.runtime_error}, _detail(verdict)
    probe = _evaluate("vector_add", "rt_persist_probe", "check")
    assert probe.status == Status.ok, _detail(probe)
    # And from the host's side: no daemon, no file in the project, the cache or the host's /tmp.
    assert not _daemons("ks_rt_persist_daemon")
    after = set(glob.glob("/tmp/ks_rt_persist*")) | set(glob.glob("/var/tmp/ks_rt_persist*"))
    assert after == before
    assert not list(ROOT.glob("sitecustomize.py")) and not list(ROOT.glob("*.pth"))
    cache = Path(os.environ["KS_CACHE_DIR"])
    assert not [p for p in cache.rglob("*") if "ks_rt_persist" in p.name]
    kept = _contents(cache / "libcode")  # the judge's library list and index, as they were
    assert {path: kept.get(path) for path in judges_records} == judges_records
    assert _contents(cache / "triton-judge") == judges_builds  # nothing planted among the judges' kernel builds
    honest = _evaluate("vector_add", "problems/vector_add/seeds/cpu.py", "check")
    assert honest.status == Status.ok, _detail(honest)


@pytest.mark.parametrize("name", ["rt_escape_build_wrapper", "rt_escape_build_specs"])
def test_a_build_cannot_run_a_program_of_the_candidates_choice(name: str) -> None:
    """Builds run on the judge's side: a flag that would make the compiler run or find a program of the
    candidate's choosing is refused, and nothing runs outside the sandbox."""
    marker = Path("/tmp/ks_rt_escape_marker")
    marker.unlink(missing_ok=True)
    verdict = _evaluate("vector_add", name, "check")
    assert verdict.status == Status.runtime_error and "not allowed" in verdict.message, _detail(verdict)
    assert not marker.exists()


def test_a_build_name_cannot_place_a_file_on_the_host() -> None:
    """A library's name is the source file's name where the judge builds: a path there was a file of the
    candidate's text written, as the judge's user, wherever it pointed."""
    planted = [Path("/tmp/ks_rt_path_name.cpp"), Path("/tmp/ks_rt_path_name_up.cpp")]
    for path in planted:
        path.unlink(missing_ok=True)
    verdict = _evaluate("vector_add", "rt_persist_build_path_name", "check")
    assert verdict.status == Status.build_error and "identifier" in verdict.message, _detail(verdict)
    assert not [p for p in planted if p.exists()]


@pytest.mark.parametrize("problem, name, status", [("vector_add", "rt_nolook_mutate_when_timed", Status.rejected),
                                                   ("vector_add", "rt_channel_claim_overwritten", Status.rejected),
                                                   ("vector_add", "rt_nolook_shared_output_late", Status.rejected),
                                                   ("vector_add", "rt_channel_digest_forge", Status.rejected),
                                                   ("softmax", "rt_channel_alias_mapping", Status.rejected),
                                                   ("vector_add", "problems/vector_add/seeds/cpu.py", Status.ok),
                                                   ("softmax", "legit_rt_persistent_out", Status.ok),
                                                   ("softmax", "legit_rt_ring_slices", Status.ok),
                                                   ("softmax", "legit_rt_ring_interleaved", Status.ok)])
def test_inputs_built_by_the_runner_come_back_with_checked_outputs(problem: str, name: str, status: Status) -> None:
    """The GPU's way of feeding timed calls (the runner blends each call's inputs from two sets it
    holds), run on the CPU: a kernel that marks its inputs during timed calls is still caught, and
    one that returns the same buffer from every call is judged on what each call returned. The
    verdict says that its figures are not bounded on the CPU."""
    path = ADV / f"{name}.py" if "/" not in name else ROOT / name
    verdict = evaluate(problem, path, EvalOptions(target="cpu", timing=FAST, resident_inputs=True,
                                                  limits=PhaseLimits(build=300, check=120, time=120)))
    assert verdict.status is status, _detail(verdict)
    assert verdict.integrity.protections.get("timing") == RECIPE_ON_CPU, verdict.integrity.protections
    if status is Status.rejected:
        rule = {"rt_channel_claim_overwritten": "output-changed-after-return",
                "rt_nolook_shared_output_late": "timed-output-wrong",
                "rt_channel_digest_forge": "output-changed-after-return",
                "rt_channel_alias_mapping": "output-changed-after-return"}.get(name, "input-mutation")
        rules = rule if isinstance(rule, tuple) else (rule,)
        assert verdict.integrity.violation is not None and verdict.integrity.violation.rule in rules, _detail(verdict)


def test_a_timing_contradicted_in_every_attempt_is_measured_in_a_fresh_runner() -> None:
    # Contradicted in its first runner, where the check phase ran, and honest in a fresh one calibrated on the
    # shape before the candidate loaded into it: the fresh runner's figures stand and the verdict says why.
    verdict = _evaluate("vector_add", "tests/fixtures/vector_add_underreports_after_checks.py")
    assert verdict.status == Status.ok, _detail(verdict)
    renewed = [(b.judge or {}).get("renewed", "") for b in verdict.benchmarks]
    assert sum(1 for r in renewed if r) == 1, renewed  # one fresh runner, honest for the rest of the evaluation
    assert next(r for r in renewed if r).startswith("contradicted 2 times in the first runner (the runner reported")
    assert all("agreed in a fresh runner" in r for r in renewed if r), renewed
    for bench in verdict.benchmarks:
        assert bench.median_us >= 0.5 * (bench.judge_median_us or 0.0), bench.judge  # its own figure, not a fifth


def test_a_runner_contradicted_in_a_fresh_runner_too_is_refused_saying_so() -> None:
    verdict = _evaluate("vector_add", "rt_channel_underreport")
    assert verdict.status == Status.rejected, _detail(verdict)
    assert verdict.integrity.violation is not None and verdict.integrity.violation.rule == "timing-contradicted"
    reason = verdict.integrity.violation.reason
    # Refused in a fresh runner too, and saying so; or, where an earlier shape took the evaluation's one fresh
    # runner or the phase's time left no room for one (a slow host: a whole run's 8M shape), refused after
    # its attempts in the first runner, saying how many.
    assert ("in a fresh runner, calibrated before the candidate loaded into it, after 2 contradicted attempts" in reason
            or "(measured 2 times, contradicted each time)" in reason), reason
