"""Checks before a run starts: a run that cannot work ends at once with exit code 2 and one line,
instead of creating a run that idles without a GPU or quietly loses its LLM after minutes of retries."""

from __future__ import annotations

import logging

from graph.config import ROLES, TARGETS, LLMSettings, RunConfig, unknown_target
from sandbox.devices import gpu_found

log = logging.getLogger(__name__)

PING_TIMEOUT_S = 20.0  # a first small request; a healthy endpoint answers in a few seconds
_VENDOR = {"cuda": ("NVIDIA", "nvidia-smi"), "hip": ("AMD", "/sys/class/kfd")}


class PreflightError(ValueError):
    """A reason the run cannot start, in one line the user can act on."""


def check_target(target: str) -> None:
    """The target exists and, for a GPU target, this host has a GPU of its vendor."""
    if target not in TARGETS:
        raise PreflightError(unknown_target(target))
    if not gpu_found(target):
        vendor, probe = _VENDOR[target]
        raise PreflightError(
            f"--target {target} needs an {vendor} GPU and {probe} shows none on this machine; "
            "use --target cpu here, or run on a host with one (`kernel-scientist doctor` says what is missing)"
        )


def check_llm(settings: LLMSettings) -> None:
    """Each distinct endpoint answers one tiny request, without retries: a wrong URL, model name or
    key fails here in seconds instead of being retried for every role of every generation."""
    from agents.llm import make_role_llm

    seen: set[tuple[str | None, str, str]] = set()
    for role in ROLES:
        config = settings.for_role(role)
        if config is None or (config.base_url, config.model, config.api_key_env) in seen:
            continue
        seen.add((config.base_url, config.model, config.api_key_env))
        quick = config.model_copy(update={"max_retries": 0, "timeout_s": min(config.timeout_s, PING_TIMEOUT_S)})
        where = f"model {config.model!r} at {config.base_url or 'the OpenAI API'}"
        try:
            reply = make_role_llm("preflight", quick).text("Answer with one word.", "Are you there?")
        except Exception as exc:  # e.g. no API key and no base_url: the client refuses to start
            raise PreflightError(f"{where} cannot be used: {exc}") from exc
        if not reply.ok:
            raise PreflightError(f"{where} did not answer a first small request: {reply.error}")
        log.info("LLM %s answered", where)


def directive_notes(config: RunConfig) -> list[str]:
    """What the user should know about their directives: without an LLM nobody reads them."""
    if config.directives and not config.llm.configured:
        return [
            f"{len(config.directives)} directive(s) stored but unused: only the LLM roles read directives, "
            "and this run has no LLM (the Tuner explores the seed's tunables)"
        ]
    return []
