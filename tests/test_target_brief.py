"""The target brief and lean prompts: each role sees the hardware, build, shapes and tolerance it
needs, the checklist of its target family, no empty blocks, and no code twice."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.coder import Coder
from agents.critic import Critic, RunOutcome
from agents.llm import LLMConfig, RoleLLM
from agents.researcher import Researcher
from agents.schemas import ExperimentPlan
from agents.scripted import ScriptedChatModel
from agents.selector import Selector
from agents.views import KernelView, ProblemView
from graph.archive import Archive
from graph.config import RunConfig
from graph.problem_view import problem_view
from graph.target_brief import HostFacts, cache_fit, cpu_hardware, read_host
from sandbox.problem import load_problem

HOST = HostFacts(model="Test CPU", flags="fpu sse4_2 avx avx2 fma avx512f", threads=4, cores=2,
                 caches={"L1d": 48 * 1024, "L2": 2 * 1024**2, "L3": 32 * 1024**2})

BASE_SOURCE = "\n".join(f"line {i}" for i in range(40)) + "\n"
TWIN_SOURCE = BASE_SOURCE.replace("line 20", "line twenty")


def view(target: str = "cpu") -> ProblemView:
    return ProblemView(
        name="softmax", target=target, description="Row softmax.", reference_code="def ref_kernel(d): ...",
        hardware="- CPU Test CPU\n- instruction set: avx2 fma" if target == "cpu" else "- h100 (sm_90a): 132 SMs",
        roofline="- rows=8, cols=8: speed of light 1 µs", build="g++ -O3 -march=native",
        test_shapes="rows=1, cols=1; rows=7, cols=33", benchmark_shapes="rows=8, cols=8",
        tolerance="rtol 1e-05, atol 1e-06",
    )


def kv(kid: str, source: str, geo: float | None = 10.0, status: str = "ok") -> KernelView:
    return KernelView(id=kid, status=status, source=source, geomean_us=geo, benchmarks={"s": geo} if geo else {})


def scripted(role: str, reply: dict[str, object]) -> tuple[RoleLLM, ScriptedChatModel]:
    model = ScriptedChatModel(script=[], default={"args": reply})
    return RoleLLM(role, model, LLMConfig(model="m", max_retries=0)), model


def cpu_softmax_view(tmp_path: Path) -> ProblemView:
    """The view graph/problem_view.py builds for softmax on HOST, one benchmark shape that fits in L3."""
    problem = load_problem("softmax", "cpu")
    archive = Archive(tmp_path / "a.sqlite")
    archive.set_meta("problem_path", str(problem.path))
    bench = SimpleNamespace(shape="rows=64, cols=16384", flops=5e6, bytes=8.4e6, sol_us=300.0, median_us=900.0,
                            reference_median_us=400.0)
    verdict = SimpleNamespace(target_profile=None, benchmarks=[bench])
    return problem_view(archive, RunConfig(problem="softmax", target="cpu"), verdict, host=HOST)  # type: ignore[arg-type]


def test_read_host_parses_cpuinfo_flags_and_threads(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Fancy CPU\nflags\t\t: fpu avx avx2 fma avx512f avx512bw\ncpu cores\t: 8\n")
    host = read_host(cpuinfo)
    assert host.model == "Fancy CPU" and host.cores == 8 and host.threads >= 1
    assert host.isa() == ["avx", "avx2", "fma", "avx512f", "avx512bw"] and host.vector_bits() == 512


def test_cpu_hardware_names_instruction_set_threads_and_caches() -> None:
    text = cpu_hardware(None, HOST)
    assert "avx2 fma avx512f (512-bit vectors)" in text and "4 threads" in text
    assert "L2 2 MB" in text and "L3 32 MB" in text


def test_cache_fit_says_when_dram_is_not_the_bound() -> None:
    assert cache_fit(1024**2, HOST) == "fits in L2: not DRAM-bound"
    assert cache_fit(16 * 1024**2, HOST) == "fits in L3: not DRAM-bound"
    assert cache_fit(64 * 1024**2, HOST) == "larger than the last cache: DRAM-bound"
    assert cache_fit(1024, None) == ""


def test_problem_view_holds_build_shapes_tolerance_and_cache_aware_roofline(tmp_path: Path) -> None:
    got = cpu_softmax_view(tmp_path)
    assert "-march=native" in got.build and "-fopenmp" in got.build
    assert "cols=33" in got.test_shapes
    assert got.tolerance.startswith("rtol 1e-05, atol 1e-06")
    assert "fits in L3" in got.roofline and "avx512f" in got.hardware


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_critic_review_gets_the_brief_a_diff_and_its_target_checklist(target: str) -> None:
    llm, model = scripted("critic", {"approve": True})
    plan = ExperimentPlan(title="p", description="d")
    Critic(llm).review(plan, TWIN_SOURCE, [], "", view(target), kv("k1", BASE_SOURCE))
    text = model.requests[-1].text
    assert "rtol 1e-05" in text and "cols=33" in text and "g++ -O3" in text and "Row softmax." in text
    assert "@@ " in text and "+line twenty" in text and "line 35" not in text  # the diff, not the file
    # The GPU checklist (spills, occupancy) only on a GPU target.
    assert ("spills" in text) == (target == "cuda") and ("OpenMP" in text) == (target == "cpu")


def test_coder_gets_the_reference_only_for_a_plan_that_uses_it_and_as_a_diff() -> None:
    llm, model = scripted("coder", {"mode": "file", "source": "x = 1\n"})
    coder = Coder(llm)
    base, reference = kv("k1", BASE_SOURCE), kv("k0", TWIN_SOURCE)
    coder.write(view(), ExperimentPlan(title="one-line change", description="d"), base, reference)
    text = model.requests[-1].text
    assert "k0" not in text and "Reference kernel" not in text
    assert "@tunable NAME" in text and "avx2" in text and "-march=native" in text
    coder.write(view(), ExperimentPlan(title="borrow", description="d", uses_reference=True), base, reference)
    text = model.requests[-1].text
    assert "Reference kernel k0 (as a diff against k1)" in text and "+line twenty" in text
    assert text.count("line 35") == 1  # the base once; the reference only as its diff


def test_the_coder_reads_the_benchmark_shapes_by_name_and_the_researcher_with_their_roofline() -> None:
    from agents.brief import target_brief

    coder, researcher = target_brief(view(), "coder"), target_brief(view(), "researcher")
    assert "Benchmark shapes (timed): rows=8, cols=8" in coder and "speed of light" not in coder
    assert "rows=8, cols=8: speed of light 1 µs" in researcher and "cols=33" in coder and "cols=33" in researcher
    # A view from before the names were kept still names them, from its roofline.
    old = view().model_copy(update={"benchmark_shapes": ""})
    assert "Benchmark shapes (timed): rows=8, cols=8" in target_brief(old, "coder")


def test_researcher_prompt_has_no_empty_blocks_and_explains_tunables() -> None:
    llm, model = scripted("researcher", {"avenues": [], "plans": [{"title": "t", "description": "d"}]})
    Researcher(llm).design(view(), kv("k1", BASE_SOURCE), None, "", [])
    text = model.requests[-1].text
    assert "@tunable NAME" in text and "uses_reference" in text
    for absent in ("(none)", "User directives", "Reference kernel", "```\n\n```", "(not given)", "compiler made"):
        assert absent not in text
    report = "vectorisation report (g++ -O3 -march=native): 1 of 4 loops vectorised by the compiler"
    Researcher(llm).design(view(), kv("k1", BASE_SOURCE), None, "", [], base_report=report)
    assert f"What the compiler made of the base:\n{report}" in model.requests[-1].text
    Researcher(llm).design(view(), kv("k1", BASE_SOURCE), kv("k0", TWIN_SOURCE), "", ["stay stable"])
    text = model.requests[-1].text
    assert "User directives (honour them):\n- stay stable" in text and "as a diff against k1" in text


def test_selector_skips_the_llm_when_the_choice_is_forced() -> None:
    llm, model = scripted("selector", {"base_id": "k0"})
    outcome = Selector(llm).select(view(), [kv("k0", "a"), kv("k1", "b", None, "build_error")], [])
    assert outcome.by == "forced" and outcome.value.base_id == "k0" and not model.requests
    Selector(llm).select(view(), [kv("k0", "a"), kv("k2", "c", 12.0)], [])
    assert len(model.requests) == 1 and "CPU Test CPU" in model.requests[-1].text


def test_critic_explain_sees_the_siblings_and_the_hardware() -> None:
    llm, model = scripted("critic", {"hypothesis": "h", "change": "c", "explanation": "e"})
    outcome = RunOutcome(candidate=kv("k3", TWIN_SOURCE, 8.0), base=kv("k1", BASE_SOURCE), diff="@@ -1 +1 @@")
    siblings = "- g2e1 (llm) library exp: k4 9 µs, 1.11x the base"
    Critic(llm).explain(ExperimentPlan(title="inline exp", description="d"), outcome, view(), siblings)
    text = model.requests[-1].text
    assert "Sibling experiments of this generation:\n" + siblings in text and "CPU Test CPU" in text
    Critic(llm).explain(ExperimentPlan(title="inline exp", description="d"), outcome, view(), "")
    assert "Sibling experiments" not in model.requests[-1].text


def test_every_checklist_item_reaches_a_prompt_as_text() -> None:
    # An unquoted YAML item with ": " in it once reached the Researcher as a Python dict.
    from agents.brief import checklist

    for target in ("cpu", "cuda"):
        for role in ("researcher", "coder", "critic_review"):
            text = checklist(target, role)
            assert text and "{" not in text and "'" not in text.replace("'s ", ""), (target, role, text)


def test_the_problem_text_does_not_contradict_the_cache_aware_roofline(tmp_path: Path) -> None:
    """softmax's text says it 'is bound by memory bandwidth'; on a CPU whose caches hold every benchmark
    shape the brief says 'not DRAM-bound'. The measured roofline wins: the claim is
    qualified, the rest of the sentence (8 bytes per element) kept."""
    from graph.problem_view import reconcile_description

    assert "is bound by memory bandwidth" in load_problem("softmax", "cpu").description
    got = cpu_softmax_view(tmp_path)
    assert "is bound by memory bandwidth" not in got.description
    assert "would be bound by memory bandwidth if its data streamed from DRAM" in got.description
    assert "every benchmark shape fits in cache" in got.description and "8 bytes" in got.description
    assert "fits in L3: not DRAM-bound" in got.roofline
    assert got.bottleneck.startswith("working set fits in cache")
    # A shape larger than the caches keeps the claim where nothing fits, and qualifies it where some do.
    assert reconcile_description("It is memory-bound.", [False]) == "It is memory-bound."
    assert "some benchmark shapes fit" in reconcile_description("It is memory-bound.", [True, False])
    assert reconcile_description("It is memory-bound.", []) == "It is memory-bound."


def test_bottleneck_on_a_gpu_is_the_roofline_s_larger_term() -> None:
    from graph.problem_view import bottleneck
    from sandbox.targets import PROFILES

    h100 = PROFILES["h100"]
    memory = SimpleNamespace(benchmarks=[SimpleNamespace(flops=5e6, bytes=8e6)])
    compute = SimpleNamespace(benchmarks=[SimpleNamespace(flops=1e12, bytes=8e6)])
    assert bottleneck(memory, h100, []).startswith("memory-bound")  # type: ignore[arg-type]
    assert bottleneck(compute, h100, []).startswith("compute-bound")  # type: ignore[arg-type]
    assert bottleneck(None, h100, []) == ""


def test_the_literature_query_asks_with_the_plan_and_the_bottleneck_not_the_seed_comment() -> None:
    from agents.researcher import research_query

    problem = view("cpu").model_copy(update={
        "hardware": "- CPU Test CPU\n- instruction set: sse4_2 avx avx2 fma (256-bit vectors)",
        "bottleneck": "working set fits in cache: bound by instruction throughput (vectorisation, SIMD, exp)"})
    seed = kv("k0", "# Naive CPU seed: one row per OpenMP iteration\n").model_copy(
        update={"summary": "seed: Naive CPU seed: one row per OpenMP iteration"})
    query = research_query(problem, seed, ["keep it stable"])
    assert "Naive CPU seed" not in query
    assert query.startswith("softmax CPU SIMD AVX2 FMA working set fits in cache") and "keep it stable" in query
    evolved = seed.model_copy(update={"plan": {"title": "fuse the max and sum passes",
                                               "description": "online softmax: one pass"}})
    assert "fuse the max and sum passes online softmax: one pass" in research_query(problem, evolved, [])
    gpu = view("cuda").model_copy(update={"bottleneck": "memory-bound: memory bandwidth"})
    assert research_query(gpu, seed, []).startswith("softmax NVIDIA GPU CUDA memory-bound")


def test_literature_context_filters_by_the_run_s_target_and_applies_the_floor() -> None:
    from graph.nodes import literature_context

    calls: list[dict[str, object]] = []

    class KB:
        def research_context(self, query: str, **kwargs: object) -> SimpleNamespace:
            calls.append({"query": query, **kwargs})
            return SimpleNamespace(to_prompt=lambda **_: "## Literature\nNo relevant literature found")

    for target, tag in (("cpu", "cpu"), ("cuda", "nvidia"), ("hip", "amd")):
        text = literature_context(KB(), view(target), kv("k0", "x"), [])
        assert "No relevant literature found" in text
        assert calls[-1]["target"] == tag and calls[-1]["findings_target"] == target
        assert "min_similarity" not in calls[-1]  # the knowledge base's own floor applies


def test_literature_excerpts_end_at_a_whole_point_and_findings_do_not_repeat_problem_and_target() -> None:
    from graph.nodes import CUT, excerpt, literature_context
    from knowledge.models import Finding, FindingHit, Hit, ResearchContext

    text = "- " + "a" * 300 + "\n  " + "b" * 200 + "\n- " + "c" * 300 + "\n- " + "d" * 400
    cut = excerpt(text, 900)
    assert cut.endswith("c" * 300 + CUT) and "d" not in cut  # the third point does not fit: left out whole
    assert excerpt("short", 900) == "short"
    hits = [Hit(chunk_id=str(i), text=text, source="primer:x.md", title="x", section="s", kind="doc",
                targets=["cpu"], score=1.0) for i in range(3)]
    finding = Finding(id="r-g1e0", hypothesis="h", change="c", kernel_id="k1", problem="softmax", target="cpu")

    class KB:
        def research_context(self, query: str, **kwargs: object) -> ResearchContext:
            return ResearchContext(query=query, literature=hits, findings=[FindingHit(finding=finding, score=1.0)])

    prompt = literature_context(KB(), view("cpu"), kv("k0", "x"), [])
    assert prompt.count("d" * 400) == 0 and prompt.count(CUT) == 3  # ranks 1-3 get 1000, 700, 500
    assert prompt.count("c" * 300) == 1  # the second point only in the best-ranked excerpt
    assert "[F r-g1e0]" in prompt and "problem softmax" not in prompt and "Kernel k1 (parent -)" in prompt


def test_the_researcher_reads_each_shape_once_with_its_roofline_and_times() -> None:
    llm, model = scripted("researcher", {"avenues": [], "plans": [{"title": "t", "description": "d"}]})
    base = KernelView(id="k1", status="ok", source=BASE_SOURCE, geomean_us=7.0, benchmarks={"rows=8, cols=8": 7.0})
    reference = base.model_copy(update={"id": "k0", "source": TWIN_SOURCE, "benchmarks": {"rows=8, cols=8": 9.0}})
    Researcher(llm).design(view(), base, reference, "", [])
    text = model.requests[-1].text
    assert "- rows=8, cols=8: speed of light 1 µs; k1 7.00 µs, k0 9.00 µs" in text and "Per-shape times" not in text
    assert "--- k1" not in text and "@@ " in text  # the diff without its file lines: the prompt names both
    # A shape the roofline does not hold keeps the table.
    odd = base.model_copy(update={"benchmarks": {"rows=9, cols=9": 7.0}})
    Researcher(llm).design(view(), odd, None, "", [])
    assert "Per-shape times (µs):\n- rows=9, cols=9: 7.00" in model.requests[-1].text


def test_a_static_report_says_each_verdict_once() -> None:
    from agents.views import compact_report

    report = ("vectorisation report: 0 of 1 loops vectorised\nline 36: not vectorised: nest\n"
              "line 48: SIMD intrinsics (vector code as written)\nline 56: SIMD intrinsics (vector code as written)")
    assert compact_report(report) == ("vectorisation report: 0 of 1 loops vectorised\nline 36: not vectorised: nest\n"
                                      "lines 48, 56: SIMD intrinsics (vector code as written)")
    assert compact_report("head\nline 3: x") == "head\nline 3: x"


def test_the_coder_reads_the_reference_code_only_where_the_description_does_not_say_what_to_compute() -> None:
    llm, model = scripted("coder", {"mode": "file", "source": "x = 1\n"})
    plan = ExperimentPlan(title="p", description="d")
    Coder(llm).write(view(), plan, kv("k1", BASE_SOURCE), None)
    assert "def ref_kernel" not in model.requests[-1].text and "Row softmax." in model.requests[-1].text
    Coder(llm).write(view().model_copy(update={"description": ""}), plan, kv("k1", BASE_SOURCE), None)
    assert "Reference implementation (what the kernel must compute):\n```\ndef ref_kernel" in model.requests[-1].text
    own_check = view().model_copy(update={"tolerance": "the problem's own check_implementation (see the reference code)"})
    Coder(llm).write(own_check, plan, kv("k1", BASE_SOURCE), None)
    assert "def ref_kernel" in model.requests[-1].text


def test_a_near_rewrite_is_shown_whole_never_as_a_diff_cut_short() -> None:
    """A diff a little shorter than the file once passed as the shorter form once its ---/+++ lines
    were dropped, though it had been cut at the file's length: the reference reached a prompt
    ending mid-line."""
    from agents.views import as_diff_or_whole

    base = "\n".join(f"keep {i}" for i in range(30)) + "\n" + "\n".join(f"old {i}" for i in range(30)) + "\n"
    other = "\n".join(f"keep {i}" for i in range(30)) + "\n" + "\n".join(f"new {i} longer" for i in range(30)) + "\n"
    form, text = as_diff_or_whole(base, other, ("k1", "k2"))
    assert (form, text) == ("whole", other) or text.rstrip().endswith("+new 29 longer")


def test_critic_explain_shows_a_rewrite_whole_and_a_small_change_as_a_diff() -> None:
    from graph.experiment import unified_diff

    llm, model = scripted("critic", {"hypothesis": "h", "change": "c", "explanation": "e"})
    rewrite = "\n".join(f"new line {i}" for i in range(40)) + "\n"
    for source, expected in ((rewrite, "Candidate, whole:\n```\nnew line 0"),
                             (TWIN_SOURCE, "Candidate, as a diff against base:\n```\n@@ ")):
        outcome = RunOutcome(candidate=kv("k3", source, 8.0), base=kv("k1", BASE_SOURCE),
                             diff=unified_diff(BASE_SOURCE, source))
        Critic(llm).explain(ExperimentPlan(title="p", description="d"), outcome, view(), "")
        assert expected in model.requests[-1].text


def test_the_seed_s_times_are_the_roofline_s_and_not_repeated() -> None:
    llm, model = scripted("researcher", {"avenues": [], "plans": [{"title": "t", "description": "d"}]})
    seed = KernelView(id="k0", origin="seed", status="ok", source=BASE_SOURCE, geomean_us=9.0,
                      benchmarks={"rows=8, cols=8": 9.0})
    Researcher(llm).design(view(), seed, None, "", [])
    text = model.requests[-1].text
    assert "- rows=8, cols=8: speed of light 1 µs\n" in text and "k0 9.00 µs" not in text
    assert "Per-shape times" not in text and "Base kernel k0 (the seed, 9.00" in text
