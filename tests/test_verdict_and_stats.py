"""The verdict record, timing statistics and output comparison."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import time
from pathlib import Path

import pytest
import torch

from sandbox import SCHEMA_VERSION
from sandbox.compare import compare_outputs
from sandbox.evaluator import EvalOptions, evaluate
from sandbox.timing import Timer, TimingPolicy, summarise
from sandbox.verdict import Status, Verdict

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_verdict_json_round_trip_and_schema() -> None:
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdict = evaluate("vector_add", seed, EvalOptions(target="cpu", timing={"budget_s": 0.1}))
    text = verdict.to_json()
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION == 1
    assert data["status"] == "ok" and data["target"] == "cpu"
    for key in ("tests", "benchmarks", "summary", "build", "environment", "errors", "phases", "submission", "problem"):
        assert key in data, key
    assert len(data["submission"]["sha256"]) == 64
    for key in ("device", "torch", "python", "driver", "toolkit"):
        assert key in data["environment"]
    again = Verdict.from_json(text)
    assert again == verdict


def test_verdict_rejects_unknown_status() -> None:
    with pytest.raises(ValueError):
        Verdict.model_validate({"status": "great", "target": "cpu", "submission": {"path": "x", "sha256": "0"}})
    assert Verdict(status=Status.timeout, target="cpu", submission={"path": "x", "sha256": "0"}).passed is False


def test_summary_statistics() -> None:
    stats = summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.median_us == 3.0 and stats.min_us == 1.0 and stats.max_us == 100.0
    assert stats.mean_us == pytest.approx(22.0)
    assert stats.std_us == pytest.approx(statistics.stdev([1, 2, 3, 4, 100]))
    assert stats.stderr_us == pytest.approx(stats.std_us / 5**0.5)
    assert stats.p25_us <= stats.median_us <= stats.p75_us
    single = summarise([5.0])
    assert single.std_us == 0.0 and single.median_us == 5.0


def test_cpu_timer_measures_what_it_times() -> None:
    def sleepy(seconds: float) -> None:
        time.sleep(seconds)

    policy = TimingPolicy(warmup_s=0.0, min_reps=5, max_reps=20, budget_s=1.0, rel_stderr=0.0)
    stats = Timer("cpu", policy).run(sleepy, lambda i: 0.004)
    assert 4000 <= stats.median_us < 12000  # sleep never returns early
    assert 5 <= stats.reps <= 20


def test_timer_stops_once_the_standard_error_is_small() -> None:
    # For samples that are never negative the standard error never exceeds the mean, so a bound above 1 is met at
    # the first check however noisy the machine is.
    policy = TimingPolicy(warmup_s=0.0, min_reps=10, max_reps=100000, budget_s=30.0, rel_stderr=1.01)
    seen: list[tuple[int, torch.Tensor]] = []
    stats = Timer("cpu", policy).run(lambda x: x + 1, lambda i: torch.ones(4), lambda i, out: seen.append((i, out)))
    assert stats.reps == 10  # converged at the first chance
    assert seen[0][0] == 0 and seen[-1][0] == 9  # verified first and last
    assert torch.equal(seen[-1][1], torch.full((4,), 2.0))


def test_timer_stops_at_its_budget() -> None:
    policy = TimingPolicy(warmup_s=0.0, min_reps=2, max_reps=10**9, budget_s=0.2, rel_stderr=0.0)
    started = time.perf_counter()
    Timer("cpu", policy).run(lambda x: time.sleep(0.001), lambda i: None)
    assert time.perf_counter() - started < 2.0


def test_comparison_names_the_worst_element() -> None:
    expected = torch.zeros(4, 5)
    got = expected.clone()
    got[2, 3] = 0.5
    got[1, 1] = 0.01
    result = compare_outputs(got, expected, rtol=0.0, atol=1e-3)
    assert not result.passed and result.mismatches == 2
    assert result.worst_index == [2, 3]
    assert "(2, 3)" in result.message and "got 0.5" in result.message and "allowed" in result.message


def test_the_worst_element_is_the_one_furthest_beyond_its_allowance() -> None:
    # A large error inside a large value's allowance passed; the small value's small error failed.
    expected = torch.tensor([100.0, 0.0, 1.0])
    got = torch.tensor([101.5, 0.01, 1.0])
    result = compare_outputs(got, expected, rtol=0.02, atol=1e-3)
    assert not result.passed and result.mismatches == 1
    assert result.worst_index == [1] and "got 0.01" in result.message, result.message


def test_where_the_reference_is_infinite_only_the_same_infinity_passes() -> None:
    # Its allowance, atol + rtol * inf, is infinite: any finite value, or the other infinity, fitted it.
    expected = torch.tensor([float("inf"), 1.0, float("-inf"), 2.0])
    for got in ([0.0, 1.0, float("-inf"), 2.0], [float("inf"), 1.0, float("inf"), 2.0]):
        result = compare_outputs(torch.tensor(got), expected, rtol=1e-3, atol=1e-3)
        assert not result.passed and result.mismatches == 1, (got, result)
    assert compare_outputs(expected.clone(), expected, rtol=1e-3, atol=1e-3).passed
    assert compare_outputs(expected.clone(), expected, rtol=None, atol=None).passed


def test_an_infinite_or_nan_output_never_passes_where_the_reference_is_finite() -> None:
    # The float32 quick pass finds these through the error itself (NaN and inf fit no finite allowance).
    expected = torch.linspace(-3, 3, 1 << 12)
    for bad in (float("inf"), float("-inf"), float("nan")):
        got = expected.clone()
        got[1234] = bad
        result = compare_outputs(got, expected, rtol=1e-2, atol=1e-2)
        assert not result.passed and result.worst_index == [1234], (bad, result.message)


def test_comparison_counts_unwritten_nan() -> None:
    expected = torch.ones(10)
    got = expected.clone()
    got[7:] = float("nan")
    result = compare_outputs(got, expected, rtol=1e-3, atol=1e-3)
    assert not result.passed and "3 elements unwritten" in result.message


def test_comparison_of_structure() -> None:
    assert "wrong shape" in compare_outputs(torch.ones(3), torch.ones(4), 0, 0).message
    assert "wrong dtype" in compare_outputs(torch.ones(3, dtype=torch.float64), torch.ones(3), 0, 0).message
    assert "expected a tensor" in compare_outputs(None, torch.ones(3), 0, 0).message
    assert compare_outputs(torch.ones(3) * 1.0001, torch.ones(3), 1e-3, 0).passed


def test_recorded_compiler_versions_are_version_lines() -> None:
    """g++ prints its licence last and nvcc its build id: the verdict keeps the line with the version."""
    from sandbox.envinfo import _version_line

    if shutil.which("g++") is None:
        pytest.skip("no g++ here")
    line = _version_line(["g++", "--version"])
    assert line is not None and line.startswith("g++") and re.search(r"\d+\.\d+", line), line
    assert _version_line(["no-such-compiler-here", "--version"]) is None


# -- intervals and paired speed-ups (sandbox/summary.py) -------------------------------------------


def test_median_interval_holds_the_true_median_about_95_percent_of_the_time() -> None:
    import random

    from sandbox.summary import median_interval

    rng = random.Random(7)
    trials, hits = 2000, 0
    for _ in range(trials):
        samples = [rng.lognormvariate(0.0, 0.3) for _ in range(30)]  # true median 1.0
        lo, hi = median_interval(samples)
        hits += lo <= 1.0 <= hi
    assert 0.93 <= hits / trials <= 0.995


def test_median_interval_of_few_samples_is_their_range() -> None:
    from sandbox.summary import median_interval

    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_shift_interval_holds_the_true_centre_about_95_percent_of_the_time_and_beats_the_median() -> None:
    import math
    import random

    from sandbox.summary import median_interval, shift_interval

    rng = random.Random(11)
    trials, hits, width, median_width = 1000, 0, 0.0, 0.0
    for _ in range(trials):
        logs = [rng.gauss(0.0, 0.12) for _ in range(24)]  # a round's noise on a busy 2-core host
        _, lo, hi = shift_interval(logs)
        hits += lo <= 0.0 <= hi
        m_lo, m_hi = median_interval(logs)
        width, median_width = width + hi - lo, median_width + m_hi - m_lo
    assert 0.93 <= hits / trials <= 0.985
    assert width < 0.92 * median_width  # same rounds, a tighter interval
    centre, lo, hi = shift_interval([math.log(1.1)] * 3 + [math.log(1.0)])
    assert (lo, hi) == (0.0, math.log(1.1)) and 0 < centre <= math.log(1.1)  # few rounds: the whole range


def test_paired_summary_keeps_the_rounds_ratios() -> None:
    from sandbox.summary import paired_summary

    summary = paired_summary([1.1, 0.9, float("nan"), 1.05])
    assert summary["round_ratios"] == [1.1, 0.9, 1.05] and summary["ratios"] == 3


def test_a_paired_ratio_says_faster_only_when_its_interval_clears_the_noise() -> None:
    from sandbox.summary import paired_summary

    clear = paired_summary([1.20, 1.22, 1.19, 1.21, 1.25, 1.18, 1.2, 1.23, 1.21, 1.2])
    assert clear["difference"] == "faster" and clear["ratio_ci"][0] > 1.01
    slower = paired_summary([0.8, 0.82, 0.79, 0.81, 0.8, 0.83, 0.78, 0.8])
    assert slower["difference"] == "slower"
    noisy = paired_summary([0.7, 1.4, 0.9, 1.3, 1.1, 0.8, 1.2, 1.0])
    assert noisy["difference"] == "no measurable difference"
    tight_but_tiny = paired_summary([1.005] * 12)  # real, but under the noise floor
    assert tight_but_tiny["difference"] == "no measurable difference"


def test_on_a_busy_host_a_burst_that_favoured_one_kernel_is_no_difference() -> None:
    from sandbox.summary import paired_summary

    # A load burst in the first half made the base look slow; each half is tight on its own.
    burst = [1.30, 1.32, 1.29, 1.31, 1.30, 1.33, 1.28, 1.31, 1.05, 1.03, 1.04, 1.06, 1.02, 1.04, 1.05, 1.03]
    assert paired_summary(burst)["difference"] == "faster"  # rounds taken as independent
    busy = paired_summary(burst, busy=True)
    assert busy["difference"] == "no measurable difference" and busy["busy_host"]
    assert busy["ratio"] == paired_summary(burst)["ratio"]  # the estimate is the same; its interval is wider
    # A real difference that holds in every block stays one.
    steady = [1.20, 1.22, 1.19, 1.21, 1.25, 1.18, 1.2, 1.23, 1.21, 1.2, 1.22, 1.19]
    assert paired_summary(steady, busy=True)["difference"] == "faster"


def test_on_a_busy_host_too_few_rounds_decide_nothing() -> None:
    from sandbox.summary import BUSY_BLOCKS, paired_summary

    # Six tight rounds, all 12% one way: decided on a quiet host; on a busy one they could be one burst.
    few = [1.12, 1.13, 1.11, 1.12, 1.14, 1.12]
    assert paired_summary(few)["difference"] == "faster" and "undecided" not in paired_summary(few)
    busy = paired_summary(few, busy=True)
    assert busy["difference"] == "no measurable difference" and "6 rounds" in busy["undecided"]
    assert busy["ratio_ci"][0] < 1 < busy["ratio_ci"][1] and busy["ratio"] == paired_summary(few)["ratio"]
    enough = paired_summary(few + few[:2 * BUSY_BLOCKS - len(few)], busy=True)  # as many rounds as blocks need
    assert enough["difference"] == "faster" and "undecided" not in enough
    # One evaluation's rounds share one stretch of the host's load: it asks for more of them.
    eleven = paired_summary((few * 2)[:11], busy=True, busy_rounds=16)
    assert eleven["difference"] == "no measurable difference" and "16 needed" in eleven["undecided"]


def test_other_work_on_the_host_is_its_busy_time_less_the_evaluations_own() -> None:
    import multiprocessing
    import os
    from types import SimpleNamespace

    from sandbox.judge.timed import HostLoad

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    # What the host does besides this test (other tests' leftovers, a shared VM) is measured first over
    # the same span, idle: the evaluation's own spinning may add nothing much to it.
    before = HostLoad([])
    time.sleep(0.3)
    background = before.other_share()
    quiet = HostLoad([])
    spin(0.3)  # the evaluation's own work is not other work
    share = quiet.other_share()
    assert background is not None and share is not None and share < background + 0.15, (share, background)
    # A sandbox whose CPU time cannot be read: no figure rather than a wrong one.
    blind = SimpleNamespace(judge=SimpleNamespace(session=SimpleNamespace(cpu_seconds=lambda: None)))
    assert HostLoad([blind]).other_share() is None  # type: ignore[list-item]
    busy = HostLoad([])
    others = [multiprocessing.Process(target=spin, args=(0.6,)) for _ in range(os.cpu_count() or 1)]
    for p in others:
        p.start()
    time.sleep(0.5)
    share = busy.other_share()
    for p in others:
        p.join()
    assert share is not None and share > 0.4, share


def test_geomean_interval_narrows_with_more_shapes_and_contains_the_geomean() -> None:
    from sandbox.summary import geomean, geomean_interval

    one = geomean_interval([100.0], [(90.0, 110.0)])
    four = geomean_interval([100.0, 200.0, 50.0, 400.0], [(90.0, 110.0), (180.0, 220.0), (45.0, 55.0), (360.0, 440.0)])
    assert one is not None and four is not None
    assert four[0] < geomean([100.0, 200.0, 50.0, 400.0]) < four[1]  # type: ignore[operator]
    assert four[1] / four[0] < one[1] / one[0]
    assert geomean_interval([100.0], [(0.0, 110.0)]) is None  # a zero cannot be in a geometric mean


def test_summary_carries_the_geomean_interval_and_the_paired_speedup() -> None:
    from sandbox.summary import summarise_benchmarks

    shape = {"median_us": 100.0, "ci_us": [95.0, 105.0],
             "paired": {"ratio": 1.5, "ratio_ci": [1.4, 1.6], "difference": "faster"}}
    summary = summarise_benchmarks([shape, dict(shape, median_us=200.0, ci_us=[190.0, 210.0])])
    assert summary["geomean_ci_us"][0] < summary["geomean_us"] < summary["geomean_ci_us"][1]
    assert summary["paired"]["difference"] == "faster" and summary["paired"]["ratio"] == 1.5


def test_host_state_calls_a_gpu_shared_with_others_or_slowed_by_heat_contended(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox import envinfo

    monkeypatch.setattr(envinfo.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    quiet = {"gpu_processes": 3, "gpu_throttle": "0x0000000000000004"}  # a power cap under load is normal
    monkeypatch.setattr(envinfo, "_nvidia_state", lambda: dict(quiet))
    state = envinfo.host_state("cuda:0", own_gpu_processes=4)
    assert not state["gpu_contended"] and state["pinned_to"]
    monkeypatch.setattr(envinfo, "_nvidia_state", lambda: quiet | {"gpu_processes": 5})
    assert envinfo.host_state("cuda:0", own_gpu_processes=4)["contended"]
    monkeypatch.setattr(envinfo, "_nvidia_state", lambda: quiet | {"gpu_throttle": "0x0000000000000020"})
    assert envinfo.host_state("cuda:0", own_gpu_processes=4)["gpu_contended"]
