"""The chat's tools: what it can read from a run and do to it.

Every tool answers in short Markdown with the ids of what it shows ([k3], [g2e1], [S1]), so the
chat model can cite them, and with numbers exactly as the archive holds them (formatted, never
computed by the model). The same functions serve the chat's slash commands, without an LLM.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from agents.chat import ChatTool
from graph import control
from graph.approval import PlanReview, ReviewError, submit_review
from graph.archive import Archive, KernelRecord
from graph.config import KNOWLEDGE_TAG
from graph.control import pending_plans
from graph.run_data import (
    VERIFIED_NOTE,
    ancestry,
    baselines,
    children,
    failure_reason,
    headline,
    num,
    num_interval,
    plan_title,
    ratio,
    seed_ratio_text,
    seed_ratios,
    shape_results,
    source_diff,
)
from graph.runs import RunHandle

log = logging.getLogger(__name__)

Launcher = Callable[[RunHandle, Archive], str]  # starts the run's process; returns what it did


class NoArgs(BaseModel):
    pass


class LeaderboardArgs(BaseModel):
    limit: int = Field(default=10, ge=1, le=50, description="How many kernels to list.")


class KernelArgs(BaseModel):
    kernel_id: str = Field(description="A kernel id such as k3.")
    include_source: bool = Field(default=False, description="Also return the kernel's source file.")


class DiffArgs(BaseModel):
    kernel_id: str = Field(description="The kernel whose changes to show.")
    against: str | None = Field(default=None, description="Another kernel id, or 'seed'; default: its parent.")


class LineageArgs(BaseModel):
    kernel_id: str


class ExperimentsArgs(BaseModel):
    generation: int | None = Field(default=None, description="Only this generation; default: all.")


class ExperimentArgs(BaseModel):
    experiment_id: str = Field(description="An experiment id such as g2e1.")


class FindingsArgs(BaseModel):
    limit: int = Field(default=10, ge=1, le=50)
    query: str | None = Field(default=None, description="Only findings mentioning all these words.")


class CompareArgs(BaseModel):
    kernel_ids: list[str] = Field(min_length=2, max_length=6, description="Kernels to compare; the first is the base.")


class SearchArgs(BaseModel):
    query: str = Field(description="What to look up in the GPU literature.")
    k: int = Field(default=4, ge=1, le=10)


class DirectiveArgs(BaseModel):
    text: str = Field(description="The goal or constraint, self-contained, in the user's words.")


class RetireArgs(BaseModel):
    seq: int = Field(description="The directive's number, as run_status lists it.")


class ControlArgs(BaseModel):
    action: Literal["start", "pause", "resume", "stop"]
    more_generations: int | None = Field(
        default=None, ge=1, description="For start/resume: allow this many more generations (needed once finished)."
    )
    now: bool = Field(
        default=False, description="For stop: interrupt at once (resumable) instead of after the generation."
    )


class ApprovalArgs(BaseModel):
    on: bool


class RunTools:
    """The tools over one run's archive."""

    def __init__(
        self,
        handle: RunHandle,
        archive: Archive,
        knowledge: Callable[[], Any] | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.handle = handle
        self.archive = archive
        self.knowledge = knowledge
        self.launcher = launcher

    def tools(self) -> list[ChatTool]:
        """Each tool is a method below: its name, its docstring's first line, its argument model."""
        specs: list[tuple[Callable[..., str], type[BaseModel]]] = [
            (self.run_status, NoArgs),
            (self.leaderboard, LeaderboardArgs),
            (self.kernel, KernelArgs),
            (self.diff, DiffArgs),
            (self.lineage, LineageArgs),
            (self.compare, CompareArgs),
            (self.generations, NoArgs),
            (self.experiments, ExperimentsArgs),
            (self.experiment, ExperimentArgs),
            (self.findings, FindingsArgs),
            (self.spend, NoArgs),
            (self.add_directive, DirectiveArgs),
            (self.directives, NoArgs),
            (self.retire_directive, RetireArgs),
            (self.control_run, ControlArgs),
            (self.set_approval_mode, ApprovalArgs),
            (self.pending_plans, NoArgs),
            (self.review_plans, PlanReview),
        ]
        if self.knowledge is not None:
            specs.append((self.search_knowledge, SearchArgs))
        return [ChatTool(fn.__name__, (inspect.getdoc(fn) or "").split("\n")[0], args, fn) for fn, args in specs]

    # -- reading ---------------------------------------------------------------------------------

    def _kernel(self, kernel_id: str) -> KernelRecord:
        key = kernel_id.strip().strip("[]")
        kernel = self.archive.seed() if key.lower() == "seed" else self.archive.kernel(key)
        if kernel is None:
            raise ValueError(f"no kernel {kernel_id!r}; kernels are named k0, k1, ... (k0 is the seed)")
        return kernel

    def run_status(self, _: NoArgs | None = None) -> str:
        """The run's state: status, budgets, best kernel, spend, directives, waiting plans."""
        a = self.archive
        status = control.run_status(a)
        top = headline(a)
        best, seed = top.best, top.seed
        base = baselines(a)
        spend = a.spend()
        lines = [
            f"run {self.handle.run_id}: problem {a.get_meta('problem_name')} on {self.handle.config.target}",
            f"status: {status.status}" + (f" (process {status.pid})" if status.alive else ""),
            f"control: {status.control}; approval mode: {'on' if status.approval else 'off'}",
            f"generations finished: {status.generations_done} of {status.generation_budget}",
        ]
        if status.stop_reason:
            lines.append(f"stopped: {status.stop_reason}")
        if best is not None:
            lines.append(f"best kernel: [{best.id}] {num_interval(best.geomean_us, best.geomean_ci_us, 'µs')} geometric mean"
                         f" with its 95% interval ({plan_title(best)})")
        if seed is not None and seed.ok:
            lines.append(f"seed: [{seed.id}] {num_interval(seed.geomean_us, seed.geomean_ci_us, 'µs')}")
            if top.seed_text():
                lines.append(f"best over seed: {top.seed_text()}")
        if base.reference_geomean_us:
            lines.append(f"PyTorch reference geometric mean: {num(base.reference_geomean_us)} µs")
        if base.sol_geomean_us:
            lines.append(f"speed-of-light geometric mean: {num(base.sol_geomean_us)} µs")
        lines.append(
            f"kernels: {len(a.kernels())}; LLM calls: {spend.calls}, tokens {spend.tokens}, cost ${spend.cost_usd:.4f}"
        )
        lines.append("directives:\n" + self.directives())
        pending = pending_plans(a)
        if pending:
            lines.append(f"plans of generation {pending['generation']} await approval: " + _plan_list(pending["plans"]))
        return "\n".join(lines)

    def leaderboard(self, args: LeaderboardArgs | None = None) -> str:
        """Correct kernels, fastest geometric mean first, against the seed and PyTorch."""
        limit = args.limit if args else 10
        over_seed = seed_ratios(self.archive)
        base = baselines(self.archive)
        rows = [
            "| # | kernel | gen | origin | parents | geomean µs [95% interval] | vs seed | vs PyTorch | plan |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for rank, k in self.archive.ranked(limit):
            rows.append(
                f"| {rank} | [{k.id}] | {k.generation} | {k.origin} | {','.join(k.parents) or '-'} | {num_interval(k.geomean_us, k.geomean_ci_us)}{' (busy host)' if k.noisy else ''} "
                f"| {seed_ratio_text(*over_seed(k))} | {ratio(base.vs_reference(k))} | {plan_title(k)[:80]} |"
            )
        failed = [k for k in self.archive.kernels() if not k.ok]
        if len(rows) == 2:
            rows.append("(no correct kernel yet)")
        else:
            rows.append("Ranked by single timings; kernels whose intervals overlap are not measurably different. "
                        + VERIFIED_NOTE + ".")
        return "\n".join(rows) + (f"\n{len(failed)} kernel(s) failed; see `experiments`." if failed else "")

    def kernel(self, args: KernelArgs) -> str:
        """One kernel: status, plan, per-shape times against PyTorch and the speed of light, static report, source."""
        k = self._kernel(args.kernel_id)
        seed = self.archive.seed()
        lines = [
            f"[{k.id}] generation {k.generation}, origin {k.origin}, parents {','.join(k.parents) or '-'}, status {k.status}",
            f"plan: {plan_title(k)}"
            + (f" (experiment [{k.experiment_id}], attempt {k.attempt})" if k.origin != "seed" else ""),
            f"summary: {k.summary}",
        ]
        if k.ok:
            line = f"geometric mean: {num_interval(k.geomean_us, k.geomean_ci_us, 'µs')} (95% interval)"
            if seed and seed.geomean_us and k.geomean_us:
                line += f"; {ratio(seed.geomean_us / k.geomean_us)} the seed's speed"
            vs_reference = baselines(self.archive).vs_reference(k)
            if vs_reference:
                line += f"; {ratio(vs_reference)} the run's PyTorch baseline"
            lines.append(line)
        else:
            lines.append(f"sandbox message: {k.message.strip()[:2000] or '(none)'}")
        rows = shape_results(self.archive, k)
        if rows:
            lines += [
                "| shape | time µs | PyTorch µs | speed of light µs | % of speed of light |",
                "|---|---|---|---|---|",
            ]
            for r in rows:
                pct = f"{100 * r.sol_us / r.median_us:.1f}%" if r.sol_us and r.median_us else "-"
                lines.append(f"| {r.shape} | {num(r.median_us)} | {num(r.reference_us)} | {num(r.sol_us)} | {pct} |")
        static = self.archive.kernel_static(k.id)
        if static:
            lines.append(f"static report: {_compact(static)}")
        if args.include_source:
            lines += ["source:", "```", k.source.rstrip(), "```"]
        return "\n".join(lines)

    def source(self, kernel_id: str | None = None) -> str:
        """A kernel's full source (default: the best), as `/source` shows it; the chat model reads
        sources through `kernel` with include_source."""
        k = self._kernel(kernel_id) if kernel_id else (self.archive.run_best() or self.archive.seed())
        if k is None:
            return "this run has no kernels yet"
        return "\n".join([f"[{k.id}] {plan_title(k)} ({k.status}, {num(k.geomean_us)} µs)", "```python", k.source.rstrip(), "```"])

    def diff(self, args: DiffArgs) -> str:
        """A unified diff of a kernel's source against its parent, the seed, or another kernel."""
        new = self._kernel(args.kernel_id)
        if args.against:
            old = self._kernel(args.against)
        elif new.parents:
            old = self._kernel(new.parents[0])
        else:
            return f"[{new.id}] is the seed: it has no parent to compare with"
        text = source_diff(old, new)
        return (
            f"diff [{old.id}] -> [{new.id}]:\n```diff\n{text}```"
            if text
            else f"[{old.id}] and [{new.id}] have the same source"
        )

    def lineage(self, args: LineageArgs) -> str:
        """A kernel's ancestors back to the seed with each step's plan, and its children."""
        chain = ancestry(self.archive, self._kernel(args.kernel_id).id)
        lines = [f"lineage of [{chain[0].id}], newest first:"]
        for k in chain:
            time_text = f"{num(k.geomean_us)} µs" if k.ok else k.status
            lines.append(f"- [{k.id}] gen {k.generation}, {time_text}: {plan_title(k)}")
        kids = children(self.archive.kernels()).get(chain[0].id, [])
        if kids:
            lines.append(
                "children: " + ", ".join(f"[{c.id}] ({num(c.geomean_us) + ' µs' if c.ok else c.status})" for c in kids)
            )
        return "\n".join(lines)

    def compare(self, args: CompareArgs) -> str:
        """Per-shape times of several kernels and their speed-ups over the first."""
        kernels = [self._kernel(i) for i in args.kernel_ids]
        base = kernels[0]
        results = {k.id: {r.shape: r for r in shape_results(self.archive, k)} for k in kernels}
        shapes = list(results[base.id]) or sorted({s for rows in results.values() for s in rows})
        header = (
            "| shape | "
            + " | ".join(f"[{k.id}] µs" for k in kernels)
            + " | "
            + " | ".join(f"[{k.id}] vs [{base.id}]" for k in kernels[1:])
            + " |"
        )
        lines = [header, "|" + "---|" * (1 + 2 * len(kernels) - 1)]
        for shape in shapes:
            times = [results[k.id].get(shape).median_us if shape in results[k.id] else None for k in kernels]
            ratios = [times[0] / t if times[0] and t else None for t in times[1:]]
            lines.append(
                f"| {shape} | "
                + " | ".join(num(t) for t in times)
                + " | "
                + " | ".join(ratio(r) for r in ratios)
                + " |"
            )
        geo = [k.geomean_us for k in kernels]
        lines.append(
            "| geometric mean | "
            + " | ".join(num(g) for g in geo)
            + " | "
            + " | ".join(ratio(geo[0] / g if geo[0] and g else None) for g in geo[1:])
            + " |"
        )
        return "\n".join(lines) + "\n(a speed-up above 1.00x means faster than the first kernel)"

    def generations(self, _: NoArgs | None = None) -> str:
        """Each generation: base, reference, best kernel so far, what its experiments gave."""
        gens = self.archive.generations()
        if not gens:
            return "no generation has finished yet"
        lines = [
            "| generation | base | reference | best so far | best µs | improved | experiments: results |",
            "|---|---|---|---|---|---|---|",
        ]
        for g in gens:
            summary = g["summary"]
            results = ", ".join(
                f"[{r.get('experiment_id')}] {r.get('status')}" + (f" [{r['kernel_id']}]" if r.get("kernel_id") else "")
                for r in summary.get("results", [])
            )
            lines.append(
                f"| {g['generation']} | {g['base_id'] or '-'} | {g['reference_id'] or '-'} | {g['best_id'] or '-'} "
                f"| {num(g['best_geomean_us'])} | {'yes' if summary.get('improved') else 'no'} | {results or 'none'} |"
            )
        return "\n".join(lines)

    def experiments(self, args: ExperimentsArgs | None = None) -> str:
        """Experiments with their plan, status and result or failure reason."""
        generation = args.generation if args else None
        records = self.archive.experiments(generation)
        if not records:
            return "no experiments" + (f" in generation {generation}" if generation is not None else "")
        lines = ["| experiment | kind | plan | base | status | kernel | result |", "|---|---|---|---|---|---|---|"]
        for e in records:
            kernel = self.archive.kernel(e.kernel_id) if e.kernel_id else None
            if kernel is not None and kernel.ok:
                result = f"{num(kernel.geomean_us)} µs"
            else:
                result = (failure_reason(self.archive, e) or e.step or "-").replace("\n", " ")[:160]
            lines.append(
                f"| [{e.id}] | {e.kind} | {str(e.plan.get('title', ''))[:60]} | {e.base_id or '-'} | {e.status} "
                f"| {e.kernel_id or '-'} | {result} |"
            )
        return "\n".join(lines)

    def experiment(self, args: ExperimentArgs) -> str:
        """One experiment: plan, every attempt with the sandbox's diagnostics, the finding."""
        e = self.archive.experiment(args.experiment_id.strip().strip("[]"))
        if e is None:
            raise ValueError(f"no experiment {args.experiment_id!r}; experiments are named g<generation>e<index>")
        plan = e.plan
        lines = [
            f"[{e.id}] generation {e.generation}, kind {e.kind}, status {e.status}, last step {e.step or '-'}",
            f"base [{e.base_id}], reference {('[' + e.reference_id + ']') if e.reference_id else '-'}",
            f"plan: {plan.get('title', '')}" + (" (added by the user)" if plan.get("by") == "user" else ""),
            f"description: {plan.get('description', '')}",
        ]
        if plan.get("rubric"):
            lines.append("rubric: " + "; ".join(map(str, plan["rubric"])))
        if e.kind == "llm":
            lines.append(
                f"estimated speed-up {plan.get('est_min_speedup')}x to {plan.get('est_max_speedup')}x, innovation {plan.get('innovation')}"
            )
        attempts = self.archive.experiment_kernels(e.id)
        for k in attempts:
            outcome = f"{num(k.geomean_us)} µs" if k.ok else f"{k.status}: {k.message.strip()[:1500]}"
            lines.append(f"attempt {k.attempt}: [{k.id}] {outcome}")
        if not attempts:
            lines.append("no kernel was evaluated")
        reason = failure_reason(self.archive, e)
        if reason:
            lines.append(f"why it failed: {reason}")
        failed_calls = [
            c for c in self.archive.llm_calls() if (c.get("step") or "").startswith(f"{e.id}/") and not c.get("ok")
        ]
        for c in failed_calls[:5]:
            lines.append(f"failed LLM call ({c['role']}, {c['method']}): {str(c.get('error'))[:300]}")
        finding = e.finding or {}
        if finding:
            lines.append(
                f"finding: hypothesis: {finding.get('hypothesis', '')} | change: {finding.get('change', '')} | "
                f"expected {finding.get('expected_speedup_min')}x to {finding.get('expected_speedup_max')}x, "
                f"measured {ratio(finding.get('measured_speedup'))} | why: {finding.get('explanation', '')} | "
                f"lesson: {finding.get('lesson', '')}"
            )
        return "\n".join(lines)

    def findings(self, args: FindingsArgs | None = None) -> str:
        """The Critic's findings: hypothesis, expected against measured speed-up, lesson."""
        args = args or FindingsArgs()
        items = self.archive.findings()
        if args.query:
            words = [w.lower() for w in args.query.split()]
            items = [f for f in items if all(w in " ".join(map(str, f.values())).lower() for w in words)]
        if not items:
            return "no findings" + (f" mentioning {args.query!r}" if args.query else "")
        lines = []
        for f in items[: args.limit]:
            lines.append(
                f"- [{f.get('experiment_id')}] -> [{f.get('kernel_id') or 'no kernel'}] {f.get('title', '')}: "
                f"expected {f.get('expected_speedup_min')}x to {f.get('expected_speedup_max')}x, measured "
                f"{ratio(f.get('measured_speedup'))} ({f.get('status')}). Why: {f.get('explanation', '')} "
                f"Lesson: {f.get('lesson', '')}"
            )
        return "\n".join(lines)

    def directives(self, _: NoArgs | None = None) -> str:
        """The active directives with their numbers."""
        records = self.archive.directive_records()
        return "\n".join(f"directive {d['seq']}: {d['text']}" for d in records) or "no active directives"

    def spend(self, _: NoArgs | None = None) -> str:
        """LLM calls, tokens and cost per role."""
        lines = ["| role | calls | failed | input tokens | output tokens | cost USD |", "|---|---|---|---|---|---|"]
        rows = [*self.archive.spend_by_role().items(), ("total", self.archive.spend())]
        for role, s in rows:
            lines.append(
                f"| {role} | {s.calls} | {s.failed} | {s.input_tokens} | {s.output_tokens} | {s.cost_usd:.4f} |"
            )
        return "\n".join(lines)

    def search_knowledge(self, args: SearchArgs) -> str:
        """Search the GPU literature knowledge base; cite hits by label and source."""
        kb = self.knowledge() if self.knowledge else None
        if kb is None:
            return "the knowledge base is not available"
        target = KNOWLEDGE_TAG.get(self.handle.config.target)
        hits = kb.search(args.query, k=args.k, target=target)
        elsewhere = ""
        if not hits and target:
            # A question names its own subject (LDS banks in a CPU run's chat): the run's target
            # comes first, the rest of the literature when it has nothing.
            hits = kb.search(args.query, k=args.k)
            elsewhere = f"\n\n(nothing for this run's target, {target}: these come from other targets' literature)"
        if not hits:
            return f"nothing found for {args.query!r}"
        found = "\n\n".join(f"[S{i}] {h.citation()}\n{h.text.strip()[:900]}" for i, h in enumerate(hits, 1))
        return found + elsewhere

    # -- acting ----------------------------------------------------------------------------------

    def _next_generation(self) -> int:
        return max((g["generation"] for g in self.archive.generations()), default=0) + 1

    def add_directive(self, args: DirectiveArgs) -> str:
        """Store a goal or constraint for the Selector and Researcher (from the next generation)."""
        seq = self.archive.add_directive(args.text)
        generation = self._next_generation()
        if self.archive.get_step(f"g{generation}/select") is not None:
            generation += 1  # this generation has planned already
        if not self.handle.config.llm.configured:
            return (
                f"directive {seq} stored: {args.text.strip()!r}. This run has no LLM, so nothing reads it: "
                "only the Selector and Researcher follow directives (the Tuner explores the seed's tunables)."
            )
        return (
            f"directive {seq} stored: {args.text.strip()!r}. The Selector and Researcher follow it from "
            f"generation {generation} on."
        )

    def retire_directive(self, args: RetireArgs) -> str:
        """Retire a directive by its number."""
        known = {d["seq"]: d["text"] for d in self.archive.directive_records()}
        if args.seq not in known:
            raise ValueError(f"no active directive {args.seq} (active: {', '.join(map(str, known)) or 'none'})")
        self.archive.retire_directive(args.seq)
        return f"directive {args.seq} retired: {known[args.seq]!r}"

    def control_run(self, args: ControlArgs) -> str:
        """Start, pause, resume or stop the run."""
        status = control.run_status(self.archive)
        generation = self._next_generation()
        if args.action == "pause":
            if not status.running:
                return f"the run is not running (status {status.status}); nothing to pause"
            control.request(self.archive, "pause")
            return (
                f"pause requested: the run waits when generation {generation} ends; resume it with control_run resume"
            )
        if args.action == "stop":
            if not status.running:
                return f"the run is not running (status {status.status})"
            if args.now and status.pid and status.pid != os.getpid():
                os.kill(status.pid, signal.SIGTERM)
                return f"sent an interrupt to process {status.pid}; the run can be resumed later"
            control.request(self.archive, "stop")
            return f"stop requested: the run ends when generation {generation} finishes (resumable)"
        if status.running:  # start or resume a run that has a process
            if status.control == "pause":
                control.request(self.archive, "run")
                return "resumed: the run goes on" + (" (it was paused)" if status.status == "paused" else "")
            return f"the run is already running (process {status.pid}, status {status.status})"
        if self.launcher is None:
            return "this chat cannot start runs"
        more = args.more_generations
        if status.status == "finished" and more is None:
            more = 1
        handle = self.handle
        if more is not None:
            handle = control.extend_run(handle, more)
            self.handle = handle
        control.request(self.archive, "run")
        started = self.launcher(handle, self.archive)
        budget = f"; it may run up to generation {handle.config.budgets.generations}"
        return started + budget

    def set_approval_mode(self, args: ApprovalArgs) -> str:
        """Approval mode on: the run waits before each generation's experiments for a review."""
        control.set_approval(self.archive, args.on)
        if args.on:
            return "approval mode on: before each generation's experiments the run waits for your review of its plans"
        return "approval mode off: plans run without review" + (
            " (the plans waiting now are accepted)" if pending_plans(self.archive) else ""
        )

    def pending_plans(self, _: NoArgs | None = None) -> str:
        """The plans waiting for approval, with their experiment ids."""
        pending = pending_plans(self.archive)
        if pending is None:
            state = control.run_status(self.archive)
            return f"no plans are waiting for approval (status {state.status}, approval mode {'on' if state.approval else 'off'})"
        lines = [
            f"generation {pending['generation']}: base [{pending['base_id']}], reference {pending.get('reference_id') or '-'}"
        ]
        if not control.run_status(self.archive).alive:
            lines.append("(the run's process has ended; a review given now applies when the run is started again)")
        for p in pending["plans"]:
            plan = p["plan"]
            if p.get("kind") == "llm":
                lines.append(
                    f"- [{p['id']}] {plan.get('title')}: {plan.get('description')} Rubric: {'; '.join(map(str, plan.get('rubric') or []))}. "
                    f"Estimated {plan.get('est_min_speedup')}x to {plan.get('est_max_speedup')}x, innovation {plan.get('innovation')}."
                )
            else:
                lines.append(f"- [{p['id']}] Tuner variant: {plan.get('title')} {plan.get('description', '')}")
        return "\n".join(lines)

    def review_plans(self, review: PlanReview) -> str:
        """Accept, reject or edit the waiting plans (keep some ids, reword, add plans)."""
        try:
            pending = submit_review(self.archive, review)
        except ReviewError as exc:
            return f"error: {exc}"
        generation = pending["generation"]
        if review.action == "accept":
            return f"accepted the {len(pending['plans'])} plans of generation {generation}; the experiments start"
        if review.action == "reject":
            return f"rejected the plans of generation {generation}: it runs no experiment, and the next generation plans again"
        kept = review.keep if review.keep is not None else [p["id"] for p in pending["plans"]]
        return (
            f"generation {generation} runs {', '.join(kept) or 'none of its plans'}"
            + (f", with {len(review.changes)} reworded" if review.changes else "")
            + (f", and {len(review.add)} plan(s) of yours" if review.add else "")
        )


def _plan_list(plans: list[dict[str, Any]]) -> str:
    return "; ".join(f"[{p['id']}] {p['plan'].get('title', '')}" for p in plans)


def _compact(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."
