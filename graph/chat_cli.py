"""`kernel-scientist chat [RUN]`: talk to a run in the terminal, with streamed replies."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, RenderableType

from graph.terminal import RUN_ARGUMENT_HELP, RUNS_DIR_HELP, console, fail, working

if TYPE_CHECKING:  # the chat's parts (LangChain among them) load when it starts, not for --help
    from rich.markdown import Markdown

    from agents.chat import ChatTurn, ToolUse
    from agents.llm_config import LLMConfig
    from graph.archive import Archive
    from graph.chat import ChatSession
    from graph.run_handle import RunHandle

log = logging.getLogger(__name__)


class ProcessLauncher:
    """Starts a run's process (`kernel-scientist run --resume`), detached from the chat."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def __call__(self, handle: RunHandle, archive: Archive) -> str:
        from graph import control

        proc = control.launch_run_process(handle)
        self.processes.append(proc)
        archive.set_meta("pid", proc.pid)
        archive.set_meta("status", "starting")
        return f"started the run in process {proc.pid} (log: {handle.run_dir / 'run.log'})"


def as_markdown(text: str) -> Markdown:
    """A tool's text for the terminal: its lines kept apart (Markdown joins them otherwise)."""
    from rich.markdown import Markdown

    lines, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        keep = fenced or line.startswith("```") or line.lstrip().startswith("|") or not line.strip()
        lines.append(line if keep else line + "  ")
    return Markdown("\n".join(lines))


class TurnView:
    """A chat turn as it streams: tool calls as dim lines, the reply as Markdown."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str]] = []  # (kind, text): tool, notice, text

    def text(self, piece: str) -> None:
        if not self.blocks or self.blocks[-1][0] != "text":
            self.blocks.append(("text", ""))
        self.blocks[-1] = ("text", self.blocks[-1][1] + piece)

    def tool(self, use: ToolUse) -> None:
        from agents.chat import tool_call_text

        failed = use.output.startswith("error:")
        self.blocks.append(("tool", f"↳ {tool_call_text(use)}" + (f"  ({use.output[:200]})" if failed else "")))

    def notice(self, message: str) -> None:
        self.blocks.append(("notice", message))

    def retract(self) -> None:
        """Take back the answer streamed last: the number check sent it back, its correction follows."""
        if self.blocks and self.blocks[-1][0] == "text":
            self.blocks.pop()

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.markdown import Markdown
        from rich.text import Text

        parts: list[RenderableType] = []
        for kind, text in self.blocks:
            if kind == "text":
                parts.append(Markdown(text))
            elif kind == "tool":
                parts.append(Text(text, style="dim"))
            else:
                parts.append(Text(f"⚠ {text}", style="yellow"))
        return Group(*parts)


def ask_and_render(session: ChatSession, question: str, out: Console) -> ChatTurn:
    from rich.live import Live

    view = TurnView()
    with Live(view.render(), console=out, refresh_per_second=12, transient=False) as live:

        def update(fn: Callable[[Any], None]) -> Callable[[Any], None]:
            def call(value: Any) -> None:
                fn(value)
                live.update(view.render())

            return call

        turn = session.ask(
            question, on_text=update(view.text), on_tool=update(view.tool), on_notice=update(view.notice),
            on_retract=lambda: update(lambda _: view.retract())(None),
        )
        if turn.ungrounded:
            view.notice(f"these numbers are not in the run's data; do not rely on them: {', '.join(turn.ungrounded)}")
        if turn.error:
            view.notice(turn.error)
        live.update(view.render())
    return turn


def show_pending(session: ChatSession, shown: set[int], out: Console) -> None:
    from rich.panel import Panel

    from graph import control

    pending = control.pending_plans(session.archive)
    if pending is None or pending["generation"] in shown:
        return
    shown.add(pending["generation"])
    body = session.tools.pending_plans()
    hint = "Answer in words (accept, reject, keep some, reword), or /accept, /reject, /keep ID..."
    out.print(
        Panel(as_markdown(body + "\n\n" + hint), title=f"generation {pending['generation']} awaits your approval")
    )


def repl(session: ChatSession, out: Console) -> None:
    from rich.panel import Panel

    out.print(
        Panel(
            as_markdown(session.tools.run_status()),
            title=f"chat · {session.handle.run_id}",
            subtitle="/help for commands, /quit to leave",
        )
    )
    if session.agent is None:
        out.print(
            "[yellow]no chat model configured[/yellow] (--model/--base-url, $KS_LLM_MODEL, or the run's LLM); /commands work"
        )
    shown: set[int] = set()
    while True:
        show_pending(session, shown, out)
        try:
            line = out.input("[bold cyan]you>[/bold cyan] ")
        except (EOFError, KeyboardInterrupt):
            out.print()
            return
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit", "/q"):
            return
        if line.startswith("/"):
            out.print(as_markdown(session.slash(line)))
            continue
        ask_and_render(session, line, out)


def chat_command(
    run: str | None = typer.Argument(None, help=RUN_ARGUMENT_HELP),
    message: list[str] = typer.Option([], "--message", "-m", help="Ask this (or run this /command) and exit."),
    model: str | None = typer.Option(None, help="Chat model (default: the run's chat or default model)."),
    base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint for the chat model."),
    llm_config: Path | None = typer.Option(None, "--llm-config", help="YAML with a `chat` or `default` entry."),
    knowledge: str | None = typer.Option(None, "--kb", help="Knowledge base directory (default: the run's)."),
    no_kb: bool = typer.Option(False, "--no-kb", help="No knowledge base search."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """Talk to a run: ask about its kernels and findings, give directives, control it, approve plans."""
    from agents.llm import make_chat_model
    from graph.archive import Archive
    from graph.chat import ChatSession
    from graph.config import ConfigError, load_llm_settings
    from graph.run_handle import RunError, open_run
    from graph.runs import lazy_knowledge

    try:
        handle = open_run(run, runs_dir)
        if model or base_url or llm_config:
            config: LLMConfig | None = load_llm_settings(llm_config, model, base_url).for_role("chat")
        else:
            config = handle.config.llm.for_role("chat")
    except (RunError, ConfigError) as exc:
        fail(str(exc))
    chat_model = None
    if config is not None:
        try:
            chat_model = make_chat_model(config)
        except Exception as exc:  # e.g. no API key: the /commands still work
            console.print(f"[yellow]no chat model:[/yellow] {exc}")
            config = None
    kb = None if no_kb else lazy_knowledge(
        knowledge or handle.config.knowledge, lambda: working("opening the knowledge base")
    )
    archive = Archive(handle.archive_path)
    session = ChatSession(handle, archive, chat_model, config, knowledge=kb, launcher=ProcessLauncher())
    try:
        if message:
            failed = False
            for text in message:
                if text.startswith("/"):
                    console.print(as_markdown(session.slash(text)))
                else:
                    turn = ask_and_render(session, text, console)
                    failed = failed or turn.error is not None
            raise typer.Exit(1 if failed else 0)
        repl(session, console)
    finally:
        archive.close()
