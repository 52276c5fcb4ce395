"""Prompt audit: every role's prompt for one fixture run, its size and the facts it holds.

A fixture run of the bundled softmax problem (seed k0, a base k1 that differs from it in one
line, a failed k2), rendered on the CPU target (a fixed 2-thread AVX2 host) and the CUDA target
(the H100 profile). Each role is called with a scripted model that records its prompt, so what is
measured is exactly what a model would read. Facts are checked by patterns, per role: a role that
must see the build command but does not is reported as missing it.

    python -m bench.prompt_audit [--json out.json]

The audit works on older checkouts too (it passes only the arguments a role accepts), so the same
command measures the prompts before and after a change.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agents.critic import Critic, RunOutcome
from agents.llm import LLMConfig, RoleLLM
from agents.researcher import Researcher
from agents.schemas import ExperimentPlan
from agents.scripted import ScriptedChatModel
from agents.selector import Selector
from agents.views import KernelView, ProblemView
from graph.archive import Archive
from graph.config import RunConfig
from sandbox.problem import load_problem
from sandbox.targets import PROFILES, TargetProfile

log = logging.getLogger("bench.prompt_audit")

ROLES = ("selector", "researcher", "coder", "critic_review", "critic_explain")

# Which facts each role needs to do its job (the list).
REQUIRED: dict[str, tuple[str, ...]] = {
    "selector": (),
    "researcher": ("hardware", "build", "shapes", "tolerance", "tunables", "diff"),
    "coder": ("hardware", "build", "shapes", "tolerance", "tunables"),
    "critic_review": ("hardware", "build", "shapes", "tolerance", "diff"),
    "critic_explain": ("hardware", "shapes", "diff"),
}

FACTS: dict[str, dict[str, re.Pattern[str]]] = {
    "cpu": {
        "hardware": re.compile(r"avx2.*(L2|L3)|(L2|L3).*avx2", re.I | re.S),
        "build": re.compile(r"-march=native"),
        "shapes": re.compile(r"cols=33.*cols=16384|cols=16384.*cols=33", re.S),
        "tolerance": re.compile(r"rtol"),
        "tunables": re.compile(r"@tunable NAME"),
        "diff": re.compile(r"^@@ ", re.M),
    },
    "cuda": {
        "hardware": re.compile(r"132 SMs.*registers.*shared memory", re.S),
        "build": re.compile(r"-gencode=arch=compute_90a"),
        "shapes": re.compile(r"cols=33.*rows=8192|rows=8192.*cols=33", re.S),
        "tolerance": re.compile(r"rtol"),
        "tunables": re.compile(r"@tunable NAME"),
        "diff": re.compile(r"^@@ ", re.M),
    },
}

CPU_PROFILE = TargetProfile(
    name="cpu", vendor="cpu", arch="AMD EPYC 7B13", compute_units=2, wave_size=1, shared_memory_kb=0,
    registers_per_lane=0, l2_mb=0.0, peak_tflops={"fp32": 0.16}, memory_tbps=0.027,
    measured={"fp32": 0.16, "memory_tbps": 0.027},
)
# A fixed host for the CPU target, so that the audit does not depend on the machine it runs on.
CPU_HOST = {
    "model": "AMD EPYC 7B13",
    "flags": "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi2",
    "threads": 2, "cores": 1,
    "caches": {"L1d": 32 * 1024, "L2": 512 * 1024, "L3": 32 * 1024 * 1024},
}

PLAN = ExperimentPlan(
    title="fuse the max and sum passes",
    description="Compute the running maximum and the rescaled sum in one pass (online softmax).",
    rubric=["one loop computing max and sum with rescaling", "keep the normalised write"],
    est_min_speedup=1.1, est_max_speedup=1.4, innovation=5,
)


# Which kernels the fixture run holds: "seed", the bundled seed and a base one tunable away from it;
# "grown", a run a generation on (CPU only), whose base is a 3.4 KB leader one tunable away from its
# reference, the case where printing both in full doubled the code a Researcher read. The leader is a
# kernel a model wrote in a relay run of the project (2026-11-25), kept as it was.
FIXTURES = ("seed", "grown")
GROWN = Path(__file__).parent / "fixtures" / "softmax_grown_cpu.py"
FIXTURE = "seed"  # set by main()


def _with_tunable(source: str) -> str:
    return source.replace("SOURCE = r\"\"\"", "SOURCE = r\"\"\"\n// @tunable UNROLL: 1, 2, 4, 8\n#define UNROLL 4", 1)


def _fixture_sources(target: str) -> tuple[str, str, str]:
    """The reference (the seed, or the grown leader), the base (the same with one tunable declared
    and set) and a candidate (one more line)."""
    problem = load_problem("softmax", target)
    reference = GROWN.read_text() if FIXTURE == "grown" else problem.seed_for(target).read_text()
    base = _with_tunable(reference)
    candidate = base.replace("#define UNROLL 4", "#define UNROLL 4\n#define FUSED_PASSES 1", 1)
    return reference, base, candidate


def _population(target: str) -> list[KernelView]:
    seed, base, _ = _fixture_sources(target)
    problem = load_problem("softmax", target)
    shapes = [problem.shape_label(p) for p in problem.benchmarks]  # the target's own benchmark shapes
    return [
        KernelView(id="k0", origin="seed", status="ok", source=seed, summary="seed: naive rows",
                   geomean_us=900.0, geomean_ci_us=(880.0, 920.0), benchmarks=dict.fromkeys(shapes, 900.0)),
        KernelView(id="k1", generation=1, parents=["k0"], origin="tune", status="ok", source=base,
                   summary="tune UNROLL 1→4", geomean_us=700.0, geomean_ci_us=(690.0, 710.0),
                   benchmarks=dict.fromkeys(shapes, 700.0)),
        KernelView(id="k2", generation=1, parents=["k0"], status="build_error", source=base + "oops\n",
                   message="kernel.cpp:3: error: expected ';'", summary="vectorised exp"),
    ]


def _fixture_verdict(target: str, profile: TargetProfile) -> SimpleNamespace:
    problem = load_problem("softmax", target)
    benchmarks = []
    for params in problem.benchmarks:
        flops, nbytes = problem.roofline.at(params)
        sol = profile.sol_seconds(flops, nbytes, problem.roofline.compute)
        benchmarks.append(SimpleNamespace(
            shape=problem.shape_label(params), flops=flops, bytes=nbytes, sol_us=sol * 1e6 if sol else None,
            median_us=900.0, reference_median_us=400.0,
        ))
    return SimpleNamespace(target_profile=profile.to_dict(), benchmarks=benchmarks)


def _accepts(func: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(func).parameters


def fixture_view(target: str, folder: Path) -> ProblemView:
    """The ProblemView the graph would build for the fixture run (through graph.problem_view)."""
    from graph import problem_view as pv

    os.environ.setdefault("KS_CUDA_ARCH", "90a")  # how the sandbox builds for a GPU it cannot see

    profile = CPU_PROFILE if target == "cpu" else PROFILES["h100"]
    archive = Archive(folder / f"{target}.sqlite")
    archive.set_meta("problem_path", str(load_problem("softmax", target).path))
    config = RunConfig(problem="softmax", target=target)
    kwargs: dict[str, Any] = {}
    if _accepts(pv.problem_view, "host"):
        kwargs["host"] = CPU_HOST if target == "cpu" else None
    return pv.problem_view(archive, config, _fixture_verdict(target, profile), **kwargs)  # type: ignore[arg-type]


# The finding of the experiment that made k1, as the run stored it (an older checkout ignores the fields
# it does not know: its id was the run's id and the experiment's, its lesson appended to the explanation).
FINDING = dict(id="g1e0", run_id="run1", hypothesis="unroll the sum", change="UNROLL 1→4", expected_speedup_min=1.0,
               expected_speedup_max=1.3, measured_speedup=1.28, explanation="fewer loop branches",
               lesson="unrolling pays; leave the factor to the Tuner", kernel_id="k1", parent_id="k0",
               problem="softmax")
# What the run measured side by side, and its findings as the Selector reads them (graph/nodes.py).
VERIFIED = "- k1 against k0: 1.28x [1.22–1.34], faster"
RUN_FINDINGS: list[dict[str, Any]] = [
    dict(experiment_id="g1e0", kernel_id="k1", parent_id="k0", title="tune UNROLL 1→4", measured_speedup=1.28,
         status="ok", lesson="unrolling pays; leave the factor to the Tuner"),
    dict(experiment_id="g1e1", kernel_id="k2", parent_id="k0", title="vectorised exp", measured_speedup=None,
         status="build_error", lesson="declare the intrinsics' header"),
]
# The Tuner's variant beside the Researcher's plans in the fixture's next generation.
TUNER = "UNROLL 4→8"


def _context(target: str, view: ProblemView, base: KernelView, directives: list[str]) -> str:
    """The Researcher's literature and findings, as the graph retrieves them, from a fresh store of the
    checkout's bundled primer and one finding: graph.nodes.literature_context where the checkout has
    it, else the query and call graph.nodes._design made before it (issue 15's starting point)."""
    from knowledge import KnowledgeBase
    from knowledge.models import Finding

    finding = Finding(**FINDING, target=target)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(Path(tmp))  # the primer only
        kb.add_finding(finding)
        try:
            from graph.nodes import literature_context
            if _accepts(literature_context, "run_id"):
                return literature_context(kb, view, base, directives, "run1")
        except ImportError:
            from agents.researcher import research_query
            from graph.nodes import VENDOR

            return kb.research_context(research_query(view, base, directives), target=VENDOR.get(target),
                                       problem=view.name, findings_target=target).to_prompt()
        return literature_context(kb, view, base, directives)


def _base_report(target: str, source: str) -> str:
    """The base's static report as the graph gives it to the Researcher: on the CPU the vectorisation
    report of this machine's compiler; on a GPU the verdict's (none here: no GPU toolchain is assumed)."""
    if target != "cpu":
        return ""
    from sandbox.static_cpu import analyze_cpu_submission

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "base.py"
        path.write_text(source)
        report = analyze_cpu_submission(path)
        return report.summary() if report.status != "no_source" else ""


def _reply(role: str) -> dict[str, Any]:
    if role == "selector":
        return {"base_id": "k1", "reference_id": "k0", "reason": "fastest"}
    if role == "researcher":
        return {"avenues": [], "plans": [PLAN.model_dump()]}
    if role == "coder":
        return {"mode": "file", "source": "x = 1\n", "summary": "s"}
    if role == "critic_review":
        return {"approve": True}
    return {"hypothesis": "h", "change": "c", "explanation": "e"}


def _llm(role: str) -> tuple[RoleLLM, ScriptedChatModel]:
    model = ScriptedChatModel(script=[], default={"args": _reply(role)})
    return RoleLLM(role.split("_")[0], model, LLMConfig(model="audit", max_retries=0)), model


def _text(model: ScriptedChatModel) -> str:
    return model.requests[-1].text if model.requests else ""


def render_prompts(target: str) -> dict[str, str]:
    """Every role's prompt text (system and user together) for the fixture run on `target`."""
    from agents.coder import Coder

    with tempfile.TemporaryDirectory() as tmp:
        view = fixture_view(target, Path(tmp))
    seed, base, candidate = _population(target)[0], _population(target)[1], _fixture_sources(target)[2]
    population = _population(target)
    directives = ["keep the kernel numerically stable"]
    prompts: dict[str, str] = {}

    llm, model = _llm("selector")
    evidence: dict[str, Any] = {}
    if _accepts(Selector.select, "verified"):
        from agents.views import finding_line

        evidence = {"verified": VERIFIED, "findings": "\n".join(finding_line(f) for f in RUN_FINDINGS)}
    Selector(llm).select(view, population, directives, **evidence)
    prompts["selector"] = _text(model)

    llm, model = _llm("researcher")
    context = _context(target, view, base, directives)
    report = {"base_report": _base_report(target, base.source)} if _accepts(Researcher.design, "base_report") else {}
    if _accepts(Researcher.design, "tuner"):
        report["tuner"] = TUNER
    Researcher(llm).design(view, base, seed, context, directives, picks=3, **report)
    prompts["researcher"] = _text(model)

    llm, model = _llm("coder")
    Coder(llm).write(view, PLAN, base, seed)
    prompts["coder"] = _text(model)

    critic_llm, model = _llm("critic_review")
    critic = Critic(critic_llm)
    review_kwargs: dict[str, Any] = {"problem": view, "base": base} if _accepts(critic.review, "problem") else {}
    critic.review(PLAN, candidate, [], "", **review_kwargs)
    prompts["critic_review"] = _text(model)

    critic_llm, model = _llm("critic_explain")
    critic = Critic(critic_llm)
    done = KernelView(id="k3", generation=2, parents=["k1"], status="ok", source=candidate, geomean_us=650.0,
                      geomean_ci_us=(640.0, 660.0), benchmarks=dict.fromkeys(base.benchmarks, 650.0))
    from graph.experiment import unified_diff

    outcome = RunOutcome(candidate=done, base=base, diff=unified_diff(base.source, candidate))
    explain_kwargs: dict[str, Any] = {"problem": view} if _accepts(critic.explain, "problem") else {}
    critic.explain(PLAN, outcome, **explain_kwargs)
    prompts["critic_explain"] = _text(model)
    return prompts


# Literature meant for another target: on the CPU any GPU excerpt, on a GPU the other vendor's or a CPU's.
OFF_TARGET = {
    "cpu": re.compile(r"\b(wgmma|Hopper|MFMA|MI300|warps?|tensor cores?|shared memory|LDS)\b", re.I),
    "cuda": re.compile(r"\b(MFMA|MI300|CDNA|AVX\w*|_mm256\w*)\b", re.I),
}


def _literature(text: str) -> str:
    start = text.find("## Literature")
    end = text.find("## Findings", start)
    return text[start:end] if start >= 0 else ""


def audit(target: str) -> list[dict[str, Any]]:
    """Per role: characters, the required facts present and missing; for the Researcher also its
    literature's characters, excerpts, and excerpts of another target's hardware."""
    rows = []
    for role, text in render_prompts(target).items():
        present = sorted(name for name, pattern in FACTS[target].items() if pattern.search(text))
        missing = [f for f in REQUIRED[role] if f not in present]
        row: dict[str, Any] = {"target": target, "role": role, "chars": len(text), "facts": present,
                               "missing": missing}
        if role == "researcher":
            literature = _literature(text)
            excerpts = re.split(r"^\[\d+\] ", literature, flags=re.M)[1:]
            row["literature"] = {"chars": len(literature), "excerpts": len(excerpts),
                                 "off_target": sum(bool(OFF_TARGET[target].search(e)) for e in excerpts),
                                 "none_relevant": "No relevant literature found" in literature}
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| target | role | characters | facts held | required facts missing |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['target']} | {r['role']} | {r['chars']} | {', '.join(r['facts']) or '-'} | "
                     f"{', '.join(r['missing']) or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--fixture", choices=FIXTURES, default="seed",
                        help="the run's kernels: the bundled seeds, or a grown CPU leader (CPU only)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    global FIXTURE
    FIXTURE = args.fixture
    rows = audit("cpu") + (audit("cuda") if args.fixture == "seed" else [])
    sys.stdout.write(table(rows) + "\n")
    for r in rows:
        if "literature" in r:
            lit = r["literature"]
            sys.stdout.write(f"{r['target']} researcher literature: {lit['chars']} characters, {lit['excerpts']} "
                             f"excerpts, {lit['off_target']} about another target's hardware"
                             f"{', says none relevant' if lit['none_relevant'] else ''}\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
