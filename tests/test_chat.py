"""The chat over a run: answers grounded in the archive, directives that reach the next generation,
run control from the chat (in this process and in another one), and approval of plans through
LangGraph's interrupt and resume."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from typer.testing import CliRunner

from agents.grounding import ungrounded_numbers
from agents.llm import LLMConfig
from agents.scripted import ScriptedChatModel
from graph import control
from graph.archive import Archive
from graph.build import build_graph
from graph.chat import ChatSession
from graph.chat_cli import ProcessLauncher
from graph.chat_tools import (
    CompareArgs,
    DiffArgs,
    ExperimentArgs,
    KernelArgs,
    LeaderboardArgs,
    LineageArgs,
    RunTools,
)
from graph.cli import app
from graph.config import LLMSettings
from graph.control import pending_plans
from graph.run_data import baselines, failure_reason, num, num_interval, ratio
from graph.runs import RunHandle, create_run
from tests import scientist_script as script
from tests.chat_script import (
    SECOND_PLAN,
    ThreadLauncher,
    coder_by_plan,
    field_value,
    last_tool_output,
    leaderboard_row,
    mixed_models,
    mixed_run,
    run_config,
    wait_for,
)
from tests.openai_server import FakeOpenAIServer, Reply, content, tool_call

DIRECTIVE = "Keep register use under 128."
runner = CliRunner()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunHandle, Archive]:
    """A finished run: the seed, a faster kernel, and a candidate that does not compile."""
    return mixed_run(tmp_path_factory.mktemp("chat") / "runs", generations=1)


def test_grounding_check_reads_numbers_like_a_person() -> None:
    sources = ["| 1 | [k3] | 2 | llm | k1 | 2220 | 6.95x | 0.44x |", "seed [k0]: 15431 µs"]
    # Ids, small counts and numbers written with fewer digits or in other units are fine ...
    assert ungrounded_numbers("[k3] (g2e1, sm_90) takes 2220 µs = 2.22 ms, 6.95x the seed; 3 kernels", sources) == []
    assert ungrounded_numbers("the seed took 15431 µs (1.54e+04)", sources) == []
    # ... a time, a ratio or a percentage that no source holds is not.
    assert ungrounded_numbers("[k3] takes 1234.5 µs, 7.4x the seed, 85% of peak", sources) == ["1234.5", "7.4", "85"]


@pytest.mark.slow
def test_tools_read_the_run_from_the_archive(mixed: tuple[RunHandle, Archive]) -> None:
    handle, archive = mixed
    tools = RunTools(handle, archive)
    best, seed = archive.best(), archive.seed()
    row = leaderboard_row(tools.leaderboard(LeaderboardArgs()))
    assert row["kernel"] == f"[{best.id}]" and row["geomean"] == num(best.geomean_us)
    assert row["vs_seed"] == ratio(seed.geomean_us / best.geomean_us)
    assert row["vs_pytorch"] == ratio(baselines(archive).vs_reference(best))  # the run's one baseline
    # Per-shape times against PyTorch and the speed of light, as the sandbox's verdict has them.
    text = tools.kernel(KernelArgs(kernel_id=best.id, include_source=True))
    for b in json.loads(archive.kernel_verdict(best.id))["benchmarks"]:
        cells = f"| {b['shape']} | {num(b['median_us'])} | {num(b['reference_median_us'])} | {num(b['sol_us'])} |"
        assert cells in text
    assert best.source.strip() in text
    diff = tools.diff(DiffArgs(kernel_id=best.id))
    assert "+  #pragma omp parallel for schedule(static)" in diff and f"--- {seed.id} (seed)" in diff
    assert tools.diff(DiffArgs(kernel_id=best.id, against="seed")) == diff
    assert f"[{seed.id}]" in tools.lineage(LineageArgs(kernel_id=best.id))
    compare = tools.compare(CompareArgs(kernel_ids=[seed.id, best.id]))
    assert (
        f"| {num(seed.geomean_us)} | {num(best.geomean_us)} | {ratio(seed.geomean_us / best.geomean_us)} |" in compare
    )
    # Why the second experiment failed: the compiler's own words.
    failed = next(e for e in archive.experiments() if failure_reason(archive, e))
    (attempt,) = archive.experiment_kernels(failed.id)
    text = tools.experiment(ExperimentArgs(experiment_id=failed.id))
    assert attempt.status == "build_error" and f"attempt 0: [{attempt.id}] build_error" in text
    assert attempt.message.strip()[:300] in text and SECOND_PLAN["title"] in text
    by_name = {t.name: t for t in tools.tools()}
    assert "error: kernel failed: no kernel 'k99'" in by_name["kernel"].run({"kernel_id": "k99"})
    assert by_name["compare"].run({"kernel_ids": [best.id]}).startswith("error: bad arguments for compare")
    # Without a chat model the /commands still answer; questions say what is missing.
    session = ChatSession(handle, archive)
    assert f"best kernel: [{best.id}] {num_interval(best.geomean_us, best.geomean_ci_us, 'µs')}" in session.slash("/status")
    assert "build_error" in session.slash("/experiments")
    assert session.ask("which kernel is fastest?").error.startswith("no chat model is configured")


def answer_from_leaderboard(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
    row = leaderboard_row(last_tool_output(messages))
    return f"The fastest kernel is {row['kernel']} at {row['geomean']} µs, {row['vs_seed']} the seed's speed."


@pytest.mark.slow
def test_answers_come_from_tool_results(mixed: tuple[RunHandle, Archive]) -> None:
    handle, archive = mixed
    calls_before = len(archive.llm_calls("chat"))
    model = ScriptedChatModel(script=[{"tool": "leaderboard", "args": {"limit": 5}}, answer_from_leaderboard])
    session = ChatSession(handle, archive, model)
    streamed: list[str] = []
    used: list[Any] = []
    turn = session.ask("Which kernel is fastest, and how much faster than the seed?", streamed.append, used.append)
    best, seed = archive.best(), archive.seed()
    expected = f"[{best.id}] at {num(best.geomean_us)} µs, {ratio(seed.geomean_us / best.geomean_us)} the seed's"
    assert expected in turn.text and "".join(streamed) == turn.text
    assert [u.name for u in used] == ["leaderboard"] and not turn.revised and turn.ungrounded == []
    # The model was told where numbers come from, and had the run's tools.
    first = model.requests[0]
    assert isinstance(first.messages[0], SystemMessage)
    system = " ".join(first.messages[0].text.split())
    assert "must come from a tool result" in system and "never estimate, recall or invent a number" in system
    assert handle.run_id in system
    names = {t["function"]["name"] for t in first.kwargs["tools"]}
    assert {"leaderboard", "kernel", "diff", "experiment", "add_directive", "control_run", "review_plans"} <= names
    # Both requests are in the archive under the chat role.
    calls = archive.llm_calls("chat")[calls_before:]
    assert [c["step"] for c in calls] == ["chat/1", "chat/2"] and calls[0]["tool_calls"][0]["name"] == "leaderboard"
    assert calls[1]["reply"] == turn.text and all(c["input_tokens"] > 0 for c in calls)


@pytest.mark.slow
def test_an_invented_number_is_sent_back(mixed: tuple[RunHandle, Archive]) -> None:
    handle, archive = mixed
    best = archive.best()

    def answer_from_kernel(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        return f"[{best.id}] runs at {field_value(last_tool_output(messages), 'geometric mean')}."

    # The run's figures are measured live, and a plain decimal such as 9.87 can match one of
    # them after a unit change (987 µs, 98.7%). Numbers written with an exponent match only
    # their own scale, so these can come from no source.
    model = ScriptedChatModel(
        script=[
            f"[{best.id}] runs at 7.77e+17 µs, 3.33e+15x faster than the seed.",
            {"tool": "kernel", "args": {"kernel_id": best.id}},
            answer_from_kernel,
        ]
    )
    notices: list[str] = []
    turn = ChatSession(handle, archive, model).ask("How fast is the best kernel?", on_notice=notices.append)
    assert turn.revised and turn.ungrounded == []
    assert turn.text == f"[{best.id}] runs at {num_interval(best.geomean_us, best.geomean_ci_us, 'µs')} (95% interval)."
    check = model.requests[1].messages[-1].text
    assert "7.77e+17, 3.33e+15" in check and "appear in no tool result" in check
    assert notices == ["numbers not found in the run's data: 7.77e+17, 3.33e+15; asking again"]
    # A model that insists is answered once, and the turn says which numbers have no source;
    # a number the user gave is a source.
    stubborn = ScriptedChatModel(script=["It takes 6.02e+23 µs, under your 5000 µs.", "Still 6.02e+23 µs."])
    turn = ChatSession(handle, archive, stubborn).ask("Is it under 5000 µs?")
    assert turn.ungrounded == ["6.02e+23"] and len(stubborn.requests) == 2


@pytest.mark.slow
def test_chat_command_streams_through_an_openai_compatible_server(mixed: tuple[RunHandle, Archive]) -> None:
    handle, archive = mixed
    best = archive.best()
    answer = f"The fastest kernel is [{best.id}] at {num(best.geomean_us)} µs."
    calls_before = len(archive.llm_calls("chat"))
    with FakeOpenAIServer() as server:
        server.push(tool_call({"limit": 3}, name="leaderboard"), content(answer))
        result = runner.invoke(
            app,
            ["chat", str(handle.run_dir), "--model", "chat-model", "--base-url", server.base_url, "--no-kb"]
            + ["-m", "Which kernel is fastest?"],
            env={"COLUMNS": "160"},
        )
        bodies = server.bodies
    assert result.exit_code == 0, result.output
    assert "↳ leaderboard(limit=3)" in result.output and answer in result.output
    assert all(b["stream"] and b["stream_options"] == {"include_usage": True} for b in bodies)
    assert bodies[0]["model"] == "chat-model" and "control_run" in {t["function"]["name"] for t in bodies[0]["tools"]}
    tool_result = next(m for m in bodies[1]["messages"] if m["role"] == "tool")
    assert f"| 1 | [{best.id}] |" in tool_result["content"]
    calls = archive.llm_calls("chat")[calls_before:]
    assert len(calls) == 2 and all(c["output_tokens"] > 0 for c in calls)  # usage came with the stream


def gated_models(gates: list[threading.Event], explained: list[int]) -> dict[str, ScriptedChatModel]:
    """Scientist roles whose Critic holds each experiment's explanation until its gate opens."""

    def critic(messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
        if "Static integrity scan" not in script.prompt_text(messages):
            n = len(explained)
            explained.append(n)
            if n < len(gates):
                assert gates[n].wait(120), f"gate {n} never opened"
        return script.approve(messages, kwargs)

    models = script.scientist_models()
    models["critic"] = ScriptedChatModel(responder=critic)
    return models


@pytest.mark.slow
def test_directive_reaches_the_next_generation_and_the_chat_controls_the_run(tmp_path: Path) -> None:
    handle = create_run(run_config(parallel=1, generations=5), tmp_path / "runs")
    archive = Archive(handle.archive_path)
    gates = [threading.Event() for _ in range(3)]
    explained: list[int] = []
    launcher = ThreadLauncher(lambda: gated_models(gates, explained))
    chat = ScriptedChatModel(
        script=[
            {"tool": "control_run", "args": {"action": "start"}},
            "The run has started.",
            {"tool": "control_run", "args": {"action": "pause"}},
            "It pauses when generation 1 ends.",
            {"tool": "add_directive", "args": {"text": DIRECTIVE}},
            "Stored: the Selector and Researcher follow it from the next generation.",
            {"tool": "control_run", "args": {"action": "start", "more_generations": 1}},
            "Started for one more generation.",
        ]
    )
    session = ChatSession(handle, archive, chat, launcher=launcher)
    assert "started the run in a thread" in session.ask("Start the run.").tools[0].output
    wait_for(lambda: explained, what="generation 1's experiment to reach its Critic")
    assert control.run_status(archive).running
    assert "pause requested" in session.ask("Pause it after this generation.").tools[0].output
    gates[0].set()
    wait_for(lambda: archive.get_meta("status") == "paused", what="the run to pause")
    assert control.run_status(archive).status == "paused"
    assert [g["generation"] for g in archive.generations()] == [1] and archive.get_step("g2/select") is None
    # A directive given while the run waits: stored, and promised for generation 2.
    turn = session.ask("From now on keep register use under 128.")
    assert "from generation 2 on" in turn.tools[0].output and archive.directives() == [DIRECTIVE]
    assert "resumed" in session.slash("/resume")
    wait_for(lambda: len(explained) == 2, what="generation 2's experiment to reach its Critic")
    assert "stop requested" in session.slash("/stop")
    gates[1].set()
    launcher.join()
    assert launcher.results[0]["stop_reason"] == "stopped on request"
    assert [g["generation"] for g in archive.generations()] == [1, 2]
    assert control.current(archive) == "run"  # the stop request was consumed
    first = launcher.started[0]
    researcher = [r.text for r in first["researcher"].requests]
    assert len(researcher) == 2 and DIRECTIVE not in researcher[0] and DIRECTIVE in researcher[1]
    # Generation 1's choice is forced (the seed is the only correct kernel): the Selector is asked once.
    selector = [r.text for r in first["selector"].requests]
    assert len(selector) == 1 and DIRECTIVE in selector[0]
    # One more generation, asked for in words: the budget grows, the run goes on from its checkpoint.
    gates[2].set()
    turn = session.ask("Run one more generation.")
    assert "started the run in a thread" in turn.tools[0].output
    launcher.join()
    assert launcher.results[1]["stop_reason"] == "generation budget reached (3)"
    assert [g["generation"] for g in archive.generations()] == [1, 2, 3]
    assert json.loads((handle.run_dir / "run.json").read_text())["budgets"]["generations"] == 3
    second = launcher.started[1]
    assert len(second["selector"].requests) == 1 and DIRECTIVE in second["selector"].requests[0].text
    assert control.run_status(archive).status == "finished"


@pytest.mark.slow
def test_approval_mode_interrupts_before_the_experiments_and_resumes_with_the_review(tmp_path: Path) -> None:
    handle = create_run(run_config(parallel=2, generations=2), tmp_path / "runs")
    archive = Archive(handle.archive_path)
    launcher = ThreadLauncher(mixed_models)
    edited = "Split rows over OpenMP threads in chunks of 4 rows; store each exponential once."
    chat = ScriptedChatModel(
        script=[
            {"tool": "set_approval_mode", "args": {"on": True}},
            {"tool": "control_run", "args": {"action": "start"}},
            "Approval mode is on and the run has started.",
        ]
    )
    session = ChatSession(handle, archive, chat, launcher=launcher)
    session.ask("Turn on approval mode and start the run.")
    pending = wait_for(lambda: pending_plans(archive), what="generation 1's plans to await approval")
    assert pending["generation"] == 1 and [p["id"] for p in pending["plans"]] == ["g1e0", "g1e1"]
    ids = {p["plan"]["title"]: p["id"] for p in pending["plans"]}
    keep, drop = ids[script.PLAN["title"]], ids[SECOND_PLAN["title"]]
    assert archive.experiments() == [] and control.run_status(archive).status == "awaiting_approval"
    # The run stopped in LangGraph's interrupt, at the approve node, with the plans as its value.
    conn = sqlite3.connect(handle.checkpoint_path, check_same_thread=False)
    try:
        snapshot = (
            build_graph()
            .compile(checkpointer=SqliteSaver(conn))
            .get_state({"configurable": {"thread_id": handle.run_id}})
        )
    finally:
        conn.close()
    assert snapshot.next == ("approve",) and snapshot.interrupts[0].value["generation"] == 1
    assert "error: no plan g1e7" in session.slash("/keep g1e7")  # a review naming unknown plans is refused
    review = {
        "action": "edit",
        "keep": [keep],
        "changes": [{"id": keep, "description": edited}],
        "note": "the one-pass idea is too risky",
    }
    chat.extend(
        {"tool": "pending_plans", "args": {}},
        {"tool": "review_plans", "args": review},
        "Generation 1 runs the parallel-rows plan only, reworded.",
    )
    turn = session.ask("Run only the parallel-rows plan, in chunks of 4 rows; drop the one-pass idea, too risky.")
    assert [u.name for u in turn.tools] == ["pending_plans", "review_plans"]
    assert f"[{drop}] {SECOND_PLAN['title']}" in turn.tools[0].output
    assert f"runs {keep}, with 1 reworded" in turn.tools[1].output
    pending = wait_for(
        lambda: (p := pending_plans(archive)) and p["generation"] == 2 and p, what="generation 2's plans"
    )
    # Generation 1 ran the kept plan only, as reworded, and the dropped plan became a directive.
    (experiment,) = archive.experiments(1)
    assert experiment.id == keep and experiment.plan["description"] == edited
    assert experiment.plan["title"] == script.PLAN["title"] and archive.best().experiment_id == keep
    models = launcher.started[0]
    assert edited in models["coder"].requests[0].text and len(models["coder"].requests) == 1
    assert archive.get_step("g1/approval")["action"] == "edit"
    turned_down = next(d for d in archive.directives() if "turned down" in d)
    assert SECOND_PLAN["title"] in turned_down and "too risky" in turned_down
    assert turned_down in models["researcher"].requests[1].text  # generation 2 planned with it
    # Generation 2: rejected from a /command; it runs no experiment and the run ends.
    assert "rejected the plans of generation 2" in session.slash("/reject not now")
    launcher.join()
    assert launcher.results[0]["stop_reason"] == "generation budget reached (2)"
    assert archive.experiments(2) == [] and [g["experiments"] for g in archive.generations()] == [1, 0]
    assert control.run_status(archive).status == "finished" and pending_plans(archive) is None


@pytest.mark.slow
def test_chat_attaches_to_a_headless_run_in_another_process(tmp_path: Path) -> None:
    released = threading.Event()

    def respond(body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        messages = [SimpleNamespace(content=m.get("content") or "") for m in body["messages"]]
        if "You are the Selector" in system:
            args = script.selector(messages, {})["args"]
        elif "You are the Researcher" in system:
            args = script.researcher(messages, {})["args"]
        elif "You are the Coder" in system:
            released.wait(120)  # generation 1 holds here until the chat has given its directive
            args = coder_by_plan(messages, {})["args"]
        else:
            args = script.approve(messages, {})["args"]
        # As the client asked: a JSON-schema reply as content, else a call of the forced tool.
        return tool_call(args) if body.get("tools") else content(json.dumps(args))

    with FakeOpenAIServer(responder=respond) as server:
        llm = LLMSettings(default=LLMConfig(model="run-model", base_url=server.base_url, max_retries=0))
        handle = create_run(run_config(parallel=1, generations=2, llm=llm), tmp_path / "runs")
        archive = Archive(handle.archive_path)
        launcher = ProcessLauncher()
        chat = ScriptedChatModel(
            script=[
                {"tool": "control_run", "args": {"action": "start"}},
                "Started.",
                {"tool": "add_directive", "args": {"text": DIRECTIVE}},
                "Stored for the next generation.",
            ]
        )
        session = ChatSession(handle, archive, chat, launcher=launcher)
        try:
            session.ask("Start the run in the background.")
            (proc,) = launcher.processes
            wait_for(
                lambda: any("You are the Coder" in b["messages"][0]["content"] for b in server.bodies),
                timeout=180,
                what="the run's first Coder request",
            )
            state = control.run_status(archive)
            assert state.running and state.pid == proc.pid != os.getpid()
            turn = session.ask("Keep register use under 128 from now on.")
            assert "from generation 2 on" in turn.tools[0].output
            released.set()
            assert proc.wait(timeout=300) == 0, (handle.run_dir / "run.log").read_text()[-3000:]
        finally:
            released.set()
            for p in launcher.processes:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        bodies = server.bodies
    def prompts(role: str) -> list[str]:
        return [json.dumps(b["messages"]) for b in bodies if f"You are the {role}" in b["messages"][0]["content"]]

    assert len(prompts("Researcher")) == 2 and DIRECTIVE not in prompts("Researcher")[0]
    assert DIRECTIVE in prompts("Researcher")[1]
    # Generation 1's choice is forced (only the seed is correct): the Selector is asked in generation 2 only.
    assert len(prompts("Selector")) == 1 and DIRECTIVE in prompts("Selector")[0]
    assert archive.get_meta("stop_reason") == "generation budget reached (2)"
    assert control.run_status(archive).status == "finished"
    log = archive.evaluation_log()
    assert len({row["sha256"] for row in log}) == len(log) and {row["pid"] for row in log} == {proc.pid}
    assert "generation budget reached (2)" in (handle.run_dir / "run.log").read_text()


@pytest.mark.slow
def test_knowledge_search_answers_cite_their_source(mixed: tuple[RunHandle, Archive], tmp_path: Path) -> None:
    from knowledge import KnowledgeBase

    notes = tmp_path / "docs" / "lds_notes.md"
    notes.parent.mkdir()
    notes.write_text(
        "# CDNA3 shared memory notes\n\n## LDS bank conflicts\n\nThe LDS of a CDNA3 compute unit has 32 banks of "
        "4 bytes. Padding each row of a shared tile by one element avoids bank conflicts on column reads.\n"
    )
    kb = KnowledgeBase(tmp_path / "kb", primer=False)
    kb.ingest([notes], target="amd")

    def cite(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        first = last_tool_output(messages).split("\n\n")[0]
        label, citation = first.split("\n")[0].split(" ", 1)
        return f"Pad each row of the shared tile by one element to avoid bank conflicts {label} ({citation})."

    handle, archive = mixed
    model = ScriptedChatModel(
        script=[{"tool": "search_knowledge", "args": {"query": "LDS bank conflicts padding"}}, cite]
    )
    turn = ChatSession(handle, archive, model, knowledge=lambda: kb).ask("How do I avoid LDS bank conflicts?")
    output = turn.tools[0].output
    assert output.startswith("[S1] ") and "LDS bank conflicts" in output and "32 banks" in output
    # The run is on the CPU and the notes are AMD's: the run's target had nothing, and the answer says so.
    assert handle.config.target == "cpu" and "other targets' literature" in output
    source = kb.search("LDS bank conflicts padding", k=1)[0].citation()
    assert f"[S1] ({source})" in turn.text and turn.ungrounded == []


@pytest.mark.slow
def test_chat_repl_works_without_a_model(mixed: tuple[RunHandle, Archive]) -> None:
    handle, archive = mixed
    lines = [
        "/leaderboard 2",
        "/approval on",
        "/directive focus on the rows=64 shape",
        "which kernel is fastest?",
        "/directives",
        "/approval off",
        "/quit",
    ]
    result = runner.invoke(
        app, ["chat", str(handle.run_dir), "--no-kb"], input="\n".join(lines) + "\n", env={"OPENAI_API_KEY": None}
    )
    assert result.exit_code == 0, result.output
    # The run's model has no key here: the chat says so and the /commands carry on.
    assert "no chat model" in result.output and "no chat model is configured" in result.output
    assert f"[{archive.best().id}]" in result.output and "approval mode on" in result.output
    assert re.search(r"directive \d+: focus on the rows=64 shape", result.output)
    assert archive.directives() == ["focus on the rows=64 shape"] and not control.approval_enabled(archive)
    archive.retire_directive(archive.directive_records()[0]["seq"])


def test_a_sent_back_answer_is_taken_back_from_the_display(mixed: tuple[RunHandle, Archive]) -> None:
    """Issue 15: the chat streamed an answer before its number check and appended the correction
    below it. The display is told to take the streamed text back before the notice and the retry."""
    from graph.chat_cli import TurnView

    handle, archive = mixed
    best = archive.best()
    model = ScriptedChatModel(script=[f"[{best.id}] runs at 7.77e+17 µs.", f"[{best.id}] is the best kernel."])
    view = TurnView()
    turn = ChatSession(handle, archive, model).ask(
        "How fast is the best kernel?", on_text=view.text, on_notice=view.notice, on_retract=view.retract)
    assert turn.revised and turn.text == f"[{best.id}] is the best kernel."
    kinds = [kind for kind, _ in view.blocks]
    assert kinds == ["notice", "text"] and "7.77e+17" not in view.blocks[-1][1]


def test_earlier_tool_results_are_cut_in_the_history_but_stay_sources(
    mixed: tuple[RunHandle, Archive], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import chat

    monkeypatch.setattr(chat, "EARLIER_TOOL_CHARS", 100)  # this fixture's results are short
    EARLIER_TOOL_CHARS = 100
    handle, archive = mixed
    best = archive.best()

    def answer_from_kernel(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        return f"[{best.id}] runs at {field_value(last_tool_output(messages), 'geometric mean')}."

    said: list[str] = []

    def repeat(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        return said[0]

    script_ = [{"tool": "kernel", "args": {"kernel_id": best.id}}, answer_from_kernel,
               {"tool": "leaderboard", "args": {}}, repeat]
    model = ScriptedChatModel(script=script_)
    session = ChatSession(handle, archive, model)
    first = session.ask("How fast is the best kernel?")
    said.append(str(first.text))
    assert first.ungrounded == [] and len(first.tools[0].output) > EARLIER_TOOL_CHARS
    # The figure came from the first result, cut in the history now: it is still a source.
    second = session.ask("And once more?")
    assert second.error is None and not second.revised and second.text == first.text
    sent = model.requests[-1].messages
    tool_texts = [str(m.content) for m in sent if m.type == "tool"]
    assert len(tool_texts[0]) < EARLIER_TOOL_CHARS + 200 and "call kernel again" in tool_texts[0]
    assert tool_texts[-1] == second.tools[0].output  # this question's result is whole
