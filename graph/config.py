"""A run's configuration: the problem, the budgets, the roles' models and the sandbox settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agents.llm_config import LLMConfig

ROLES = ("selector", "researcher", "coder", "critic")
TARGETS = ("cpu", "cuda", "hip")  # hip: a ROCm host (MI300); there is no separate "rocm" target
# The knowledge base's tag of each run target's documents (knowledge/targets.py): a CPU run searches
# CPU and generic literature, never a GPU vendor's.
KNOWLEDGE_TAG = {"hip": "amd", "cuda": "nvidia", "cpu": "cpu"}


class Budgets(BaseModel):
    """When a run stops: whichever limit is reached first (None: no limit)."""

    model_config = ConfigDict(extra="forbid")

    generations: int = Field(default=10, ge=1)
    wall_time_s: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    patience: int | None = Field(default=3, ge=1, description="Stop after this many generations without a new best.")


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timing_budget_s: float = Field(default=1.0, gt=0, description="Seconds of timed repetitions per shape.")
    build_limit_s: float = 600.0
    check_limit_s: float = 300.0
    time_limit_s: float = 600.0
    devices: list[int] | None = None  # physical GPU indices; None: every visible GPU, one worker each
    cpu_slots: int = Field(default=1, ge=1, description="Concurrent timings on the CPU target.")
    build_workers: int | None = None
    cluster: str | None = Field(default=None, description="Ray: ray://HOST:PORT, auto, or local; None: local pool.")
    profiler: Literal["auto", "off"] = Field(
        default="auto", description="hip target: time under rocprofv3 where installed (auto), or with device events."
    )
    cluster_resources: dict[str, float] = Field(
        default_factory=dict, description="Ray resources each evaluation needs, e.g. {'gfx942': 1}."
    )
    verify_wins: bool = Field(
        default=True,
        description="Crown a new best only when a side-by-side timing against the old best says it is faster.",
    )
    cores: str | None = Field(
        default=None, description="CPU cores the judges and runners are pinned to, e.g. 0-3; None: not pinned."
    )

    @field_validator("cores")
    @classmethod
    def _cores_exist(cls, value: str | None) -> str | None:
        if value is not None:
            from sandbox.envinfo import parse_cores

            parse_cores(value)  # ValueError names the core that is not there
        return value


class LLMSettings(BaseModel):
    """`default` applies to every role a role entry does not override; no default and no role
    entries means no LLM: the run proposes candidates with the Tuner only."""

    model_config = ConfigDict(extra="forbid")

    default: LLMConfig | None = None
    selector: LLMConfig | None = None
    researcher: LLMConfig | None = None
    coder: LLMConfig | None = None
    critic: LLMConfig | None = None
    chat: LLMConfig | None = None  # `kernel-scientist chat`; not a role of the loop

    def for_role(self, role: str) -> LLMConfig | None:
        return getattr(self, role) or self.default

    @property
    def configured(self) -> bool:
        return any(self.for_role(r) is not None for r in ROLES)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str
    target: str = "cpu"
    variant: str | None = Field(default=None, description="Seed variant, e.g. triton.")
    seed: str | None = Field(default=None, description="Starting submission; default: the problem's seed.")
    parallel: int = Field(default=3, ge=1, le=16, description="Experiments per generation.")
    tuner_per_generation: int = Field(default=1, ge=0, description="Tuner experiments per generation with an LLM.")
    coder_attempts: int = Field(default=3, ge=1, description="Coder tries per experiment (first + repairs).")
    critic_sendbacks: int = Field(default=1, ge=0)
    paired_findings: bool = Field(
        default=True, description="Time a designed candidate beside its base before its finding is written, "
        "where its own timing claims a difference (graph/experiment.py side_by_side).")
    budgets: Budgets = Field(default_factory=Budgets)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    knowledge: str | None = Field(default=None, description="Knowledge base directory; default $KS_KB_DIR.")
    use_knowledge: bool | None = Field(default=None, description="Default: on when an LLM is configured.")
    directives: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_target(self) -> RunConfig:
        if self.target not in TARGETS:
            raise ValueError(unknown_target(self.target))
        return self

    @property
    def knowledge_enabled(self) -> bool:
        return self.llm.configured if self.use_knowledge is None else self.use_knowledge


def unknown_target(target: str) -> str:
    """The one message for a target that does not exist, naming the ones that do."""
    hint = " (AMD GPUs are --target hip)" if target.lower() in ("rocm", "amd", "mi300", "gfx942") else ""
    return f"unknown target {target!r}: choose one of {', '.join(TARGETS)}{hint}"


class ConfigError(ValueError):
    pass


def load_llm_settings(path: str | Path | None, model: str | None = None, base_url: str | None = None) -> LLMSettings:
    """LLM settings from a YAML file (keys: default, selector, ...), then flags, then the
    environment ($KS_LLM_MODEL, $KS_LLM_BASE_URL); none of them: no LLM."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read LLM settings {path}: {exc}") from exc
        data = data.get("llm", data)
    model = model or os.environ.get("KS_LLM_MODEL")
    base_url = base_url or os.environ.get("KS_LLM_BASE_URL")
    if model:
        default = dict(data.get("default") or {})
        default["model"] = model
        if base_url:
            default["base_url"] = base_url
        data["default"] = default
    elif base_url and data.get("default"):
        data["default"] = dict(data["default"], base_url=base_url)
    try:
        return LLMSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"bad LLM settings: {exc}") from exc
