"""Runs: create one in its own directory, resume it after a stop or a kill, and execute the graph.

A run directory holds `run.json` (the configuration), `archive.sqlite` (the population and
everything the roles said), `checkpoints.sqlite` (LangGraph's checkpoints) and `kernels/` (the
files the sandbox evaluated).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from agents.coder import Coder
from agents.critic import Critic
from agents.llm import LLMCall, RoleLLM, make_chat_model
from agents.researcher import Researcher
from agents.selector import Selector
from graph.approval import settle_approvals
from graph.archive import Archive, utc_now
from graph.build import build_graph
from graph.config import ROLES, RunConfig
from graph.context import LogProgress, Progress, RunContext
from graph.evaluation import RunEvaluator
from graph.problem_view import problem_view
from graph.run_handle import RunError, RunHandle, default_runs_dir
from sandbox.problem import ProblemError, load_problem
from sandbox.verdict import Verdict

log = logging.getLogger(__name__)

RECURSION_LIMIT = 1_000_000  # LangGraph counts steps; a run of hours takes thousands


def new_run_id(problem: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = Path(problem).stem if ("/" in problem or problem.endswith(".py")) else problem
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def create_run(config: RunConfig, runs_dir: Path | None = None, run_id: str | None = None) -> RunHandle:
    """Check the problem and the seed, then lay out a new run directory."""
    try:
        problem = load_problem(config.problem, config.target)
        seed_path = Path(config.seed) if config.seed else problem.seed_for(config.target, config.variant)
    except ProblemError as exc:
        raise RunError(str(exc)) from exc
    if not seed_path.is_file():
        raise RunError(f"seed submission not found: {seed_path}")
    run_id = run_id or new_run_id(problem.name)
    run_dir = (runs_dir or default_runs_dir()) / run_id
    if run_dir.exists():
        raise RunError(f"run directory already exists: {run_dir}")
    run_dir.mkdir(parents=True)
    config = config.model_copy(update={"seed": str(seed_path.resolve())})
    if config.knowledge is None and config.use_knowledge is not False:
        # The store this run reads, resolved now: a chat or a resumed run opens the same one, whatever
        # $KS_KB_DIR says in its environment (run.json stored "knowledge": null).
        from knowledge.paths import default_store_path

        config = config.model_copy(update={"knowledge": str(default_store_path().resolve())})
    (run_dir / "run.json").write_text(config.model_dump_json(indent=2))
    archive = Archive(run_dir / "archive.sqlite")
    try:
        archive.set_meta("run_id", run_id)
        archive.set_meta("config", config.model_dump(mode="json"))
        archive.set_meta("problem_path", str(problem.path.resolve()))
        archive.set_meta("problem_name", problem.name)
        archive.set_meta("seed_source", seed_path.read_text())
        archive.set_meta("created_at", utc_now())
        archive.set_meta("status", "created")
        for directive in config.directives:
            archive.add_directive(directive)
    finally:
        archive.close()
    return RunHandle(run_id, run_dir, config)


ChatModelFactory = Callable[[str, Any], Any]  # (role, LLMConfig) -> a LangChain chat model


def build_context(
    handle: RunHandle,
    archive: Archive,
    *,
    chat_models: dict[str, Any] | None = None,
    progress: Progress | None = None,
    knowledge: Any = None,
) -> RunContext:
    """The nodes' runtime context. `chat_models` (role -> chat model) replaces the configured
    endpoints, for scripted runs and replays; `knowledge` an opened KnowledgeBase."""
    config = handle.config
    problem_path = Path(archive.get_meta("problem_path"))
    evaluator = RunEvaluator.for_run(archive, handle.run_dir, problem_path, config.target, config.sandbox)
    ctx_holder: dict[str, RunContext] = {}

    def on_call(call: LLMCall) -> None:
        ctx_holder["ctx"].record_llm_call(call)

    llms: dict[str, RoleLLM | None] = {}
    for role in ROLES:
        role_config = config.llm.for_role(role)
        if chat_models is not None and role in chat_models:
            from agents.llm import LLMConfig

            role_config = role_config or LLMConfig(model=getattr(chat_models[role], "model_name", "scripted"))
            llms[role] = RoleLLM(role, chat_models[role], role_config, on_call=on_call)
        elif role_config is not None:
            llms[role] = RoleLLM(role, make_chat_model(role_config), role_config, on_call=on_call)
        else:
            llms[role] = None
    seed = archive.seed()
    seed_verdict_json = archive.kernel_verdict(seed.id) if seed else None
    view = problem_view(archive, config, Verdict.from_json(seed_verdict_json) if seed_verdict_json else None)

    knowledge_factory = None
    if knowledge is not None:
        knowledge_factory = lambda: knowledge  # noqa: E731
    elif config.knowledge_enabled and llms["researcher"] is not None:
        knowledge_factory = lazy_knowledge(config.knowledge)

    ctx = RunContext(
        run_id=handle.run_id,
        run_dir=handle.run_dir,
        config=config,
        archive=archive,
        evaluator=evaluator,
        problem_path=problem_path,
        view=view,
        selector=Selector(llms["selector"]),
        researcher=Researcher(llms["researcher"]),
        coder=Coder(llms["coder"]) if llms["coder"] is not None else None,
        critic=Critic(llms["critic"]),
        knowledge=knowledge_factory,
        progress=progress or LogProgress(),
    )
    ctx_holder["ctx"] = ctx
    return ctx


def replay_chat_models(archive: Archive, config: RunConfig) -> dict[str, Any]:
    """Chat models that answer each configured role's calls, in order, from a run's archive: the
    run can be replayed without the LLM (a run with parallel experiments may order its calls
    differently). A role the run had no LLM for stays without one."""
    from agents.scripted import ReplayChatModel

    calls = archive.llm_calls()
    return {role: ReplayChatModel.from_calls(calls, role) for role in ROLES if config.llm.for_role(role)}


def lazy_knowledge(
    path: str | None, opening: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> Callable[[], Any]:
    """Opens the knowledge base on first use (loading the embedding model takes seconds), once;
    `opening` wraps the opening (a progress display). Without it the run or chat goes on."""
    opened: dict[str, Any] = {}

    def get() -> Any:
        if "kb" not in opened:
            try:
                from knowledge import KnowledgeBase

                with opening():
                    opened["kb"] = KnowledgeBase(path)
            except Exception as exc:  # the run goes on without literature
                log.warning("knowledge base unavailable: %s", exc)
                opened["kb"] = None
        return opened["kb"]

    return get


def execute(handle: RunHandle, ctx: RunContext) -> dict[str, Any]:
    """Run (or resume) the graph to its end; returns the final state. Safe to call again after a
    kill: LangGraph's checkpoints and the archive's memo pick up where it stopped."""
    archive = ctx.archive
    _refuse_if_running_elsewhere(archive, handle.run_id)  # before anything marks the run as ours
    conn = sqlite3.connect(handle.checkpoint_path, check_same_thread=False)
    try:
        app = build_graph().compile(checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": handle.run_id}, "recursion_limit": RECURSION_LIMIT}
        snapshot = app.get_state(config)
        archive.set_meta("status", "running")
        archive.set_meta("pid", os.getpid())
        if snapshot.next:
            log.info("resuming run %s at %s", handle.run_id, ", ".join(snapshot.next))
            ctx.progress.event("resume", run=handle.run_id, next=list(snapshot.next))
            final = app.invoke(None, config, context=ctx)
        elif snapshot.values.get("stop_reason"):
            final = dict(snapshot.values)
        else:
            final = app.invoke({"generation": 1, "stale": 0, "elapsed_s": 0.0}, config, context=ctx)
        final = settle_approvals(app, config, ctx, final)  # approval mode: wait for reviews, resume
        # The seed's verdict tells the roles about the hardware: refresh the view once it exists.
        archive.set_meta("status", "finished")
        archive.set_meta("stop_reason", final.get("stop_reason"))
        return dict(final)
    except BaseException:
        archive.set_meta("status", "interrupted")
        raise
    finally:
        conn.close()
        ctx.evaluator.close()


def _refuse_if_running_elsewhere(archive: Archive, run_id: str) -> None:
    """Two processes executing one run would interleave their checkpoints: refuse the second."""
    pid = archive.get_meta("pid")
    if archive.get_meta("status") not in ("running", "paused", "awaiting_approval") or not pid or pid == os.getpid():
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return  # it died (killed, crashed): resuming is what the user wants
    except PermissionError:
        pass  # alive, under another user
    raise RunError(f"run {run_id} is already running in process {pid}; stop it first (kernel-scientist chat)")


def run_summary(archive: Archive) -> dict[str, Any]:
    from graph.run_data import headline

    top = headline(archive)
    best, seed = top.best, top.seed
    spend = archive.spend()
    return {
        "status": archive.get_meta("status"),
        "stop_reason": archive.get_meta("stop_reason"),
        "kernels": len(archive.kernels()),
        "evaluations": archive.evaluation_count(),
        "best": best.id if best else None,
        "best_geomean_us": best.geomean_us if best else None,
        "seed_geomean_us": seed.geomean_us if seed else None,
        "best_geomean_ci_us": best.geomean_ci_us if best else None,
        "speedup_over_seed": top.over_seed,
        "speedup_over_seed_ci": top.over_seed_ci,
        "speedup_over_seed_verified": top.verified,
        "llm_calls": spend.calls,
        "tokens": spend.tokens,
        "cost_usd": spend.cost_usd,
    }


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str)
