"""A chat session over one run: the chat model with the run's tools, and slash commands that work
without a model.

The session reads and writes only the run's archive (WAL mode), so it attaches to a run that
another process executes: directives it stores reach the next generation's Selector and Researcher,
control requests are picked up at the next generation boundary, and reviews of waiting plans go to
the process that waits for them.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from itertools import count
from typing import Any

from langchain_core.language_models import BaseChatModel

from agents.chat import ChatAgent, ChatTurn, NoticeSink, RetractSink, TextSink, ToolSink
from agents.llm import LLMCall, LLMConfig
from graph.approval import PlanReview
from graph.archive import Archive
from graph.chat_tools import (
    ApprovalArgs,
    ControlArgs,
    DiffArgs,
    DirectiveArgs,
    ExperimentArgs,
    ExperimentsArgs,
    KernelArgs,
    Launcher,
    LeaderboardArgs,
    RetireArgs,
    RunTools,
)
from graph.runs import RunHandle

log = logging.getLogger(__name__)

SLASH_HELP = """Commands (no LLM needed):
/status · /leaderboard [N] · /kernel ID · /source [ID] · /diff ID [AGAINST] · /experiments [GEN] · /experiment ID · /spend
/directive TEXT · /directives · /retire N · /start [N more generations] · /pause · /resume [N] · /stop [now]
/approval on|off · /plans · /accept · /reject [why] · /keep ID... (run only these plans) · /help · /quit"""


class ChatSession:
    def __init__(
        self,
        handle: RunHandle,
        archive: Archive,
        chat_model: BaseChatModel | None = None,
        llm_config: LLMConfig | None = None,
        knowledge: Callable[[], Any] | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.handle = handle
        self.archive = archive
        self.tools = RunTools(handle, archive, knowledge=knowledge, launcher=launcher)
        self._numbers = count(1)
        self.agent: ChatAgent | None = None
        if chat_model is not None:
            self.agent = ChatAgent(
                chat_model, self.tools.tools(), self.tools.run_status(), config=llm_config, on_call=self._record
            )

    def _record(self, call: LLMCall) -> None:
        self.archive.add_llm_call(call.model_dump(mode="json"), step=f"chat/{next(self._numbers)}")

    def ask(
        self,
        question: str,
        on_text: TextSink | None = None,
        on_tool: ToolSink | None = None,
        on_notice: NoticeSink | None = None,
        on_retract: RetractSink | None = None,
    ) -> ChatTurn:
        if self.agent is None:
            return ChatTurn(error="no chat model is configured: use the /commands (/help lists them)")
        return self.agent.ask(question, on_text=on_text, on_tool=on_tool, on_notice=on_notice, on_retract=on_retract)

    def slash(self, line: str) -> str:
        """Run a /command; returns its answer as Markdown text."""
        try:
            words = shlex.split(line.strip().lstrip("/"))
        except ValueError:
            words = line.strip().lstrip("/").split()
        if not words:
            return SLASH_HELP
        name, rest = words[0].lower(), words[1:]
        text = " ".join(rest)
        t = self.tools
        try:
            match name:
                case "help" | "?":
                    return SLASH_HELP
                case "status":
                    return t.run_status()
                case "leaderboard" | "lb":
                    return t.leaderboard(LeaderboardArgs(limit=int(rest[0]) if rest else 10))
                case "kernel":
                    return t.kernel(KernelArgs(kernel_id=rest[0], include_source="source" in rest[1:]))
                case "source":
                    return t.source(rest[0] if rest else None)
                case "diff":
                    return t.diff(DiffArgs(kernel_id=rest[0], against=rest[1] if len(rest) > 1 else None))
                case "experiments":
                    return t.experiments(ExperimentsArgs(generation=int(rest[0]) if rest else None))
                case "experiment":
                    return t.experiment(ExperimentArgs(experiment_id=rest[0]))
                case "spend":
                    return t.spend()
                case "directive":
                    return t.add_directive(DirectiveArgs(text=text))
                case "directives":
                    return t.directives()
                case "retire":
                    return t.retire_directive(RetireArgs(seq=int(rest[0])))
                case "start" | "resume" | "pause" | "stop":
                    more = int(rest[0]) if rest and rest[0].isdigit() else None
                    return t.control_run(ControlArgs(action=name, more_generations=more, now="now" in rest))
                case "approval":
                    if not rest or rest[0] not in ("on", "off"):
                        return "usage: /approval on|off"
                    return t.set_approval_mode(ApprovalArgs(on=rest[0] == "on"))
                case "plans":
                    return t.pending_plans()
                case "accept":
                    return t.review_plans(PlanReview(action="accept"))
                case "reject":
                    return t.review_plans(PlanReview(action="reject", note=text))
                case "keep":
                    return t.review_plans(PlanReview(action="edit", keep=[w.strip("[],") for w in rest]))
                case _:
                    return f"unknown command /{name}\n\n{SLASH_HELP}"
        except IndexError:
            return f"/{name} needs an argument\n\n{SLASH_HELP}"
        except ValueError as exc:
            return f"error: {exc}"
