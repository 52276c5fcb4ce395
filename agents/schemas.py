"""Typed replies of the roles: what each LLM call must return, validated with pydantic."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class Selection(BaseModel):
    """The Selector's pick: the base to improve and a kernel worth learning from."""

    base_id: str = Field(description="Id of the kernel to build the next experiments on (usually the best).")
    reference_id: str | None = Field(
        default=None,
        description="Id of a kernel worth learning from: a divergent idea or one that wins on some shapes.",
    )
    reason: str = Field(default="", description="Why these two, in a sentence or two.")


class Avenue(BaseModel):
    title: str
    rationale: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        # Models often list avenues as plain sentences: the sentence is the title (the plans, not the
        # avenues, are what the loop runs, so a whole reply must not be lost over their form).
        return {"title": value} if isinstance(value, str) else value


class ExperimentPlan(BaseModel):
    title: str = Field(description="A short name for the experiment.")
    description: str = Field(description="What to change and why it should be faster.")
    rubric: list[str] = Field(default_factory=list, description="The concrete code changes, one per item.")
    est_min_speedup: float = Field(default=1.0, description="Expected speed-up over the base, pessimistic.")
    est_max_speedup: float = Field(default=1.0, description="Expected speed-up over the base, optimistic.")
    innovation: float = Field(default=5.0, description="How new the idea is in this lineage, 0 to 10.")
    sources: list[str] = Field(default_factory=list, description="Citations ([n] or F id) of what it rests on.")
    uses_reference: bool = Field(
        default=False, description="True only when the Coder must read the reference kernel's code."
    )

    @field_validator("rubric", "sources", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        # Models often give one string where a list is asked for.
        return [value] if isinstance(value, str) else value


class ResearchPlan(BaseModel):
    """The Researcher's reply: avenues first, then concrete plans."""

    avenues: list[Avenue] = Field(default_factory=list, description="About 10 avenues for improvement.")
    plans: list[ExperimentPlan] = Field(description="About 5 experiment plans.")


class Edit(BaseModel):
    search: str = Field(description="Exact text of the base file to replace (must occur once).")
    replace: str


class CoderReply(BaseModel):
    """A new kernel: the whole file, or search-and-replace edits to the base file."""

    mode: Literal["file", "edits"] = "file"
    source: str | None = Field(default=None, description="The whole submission file when mode is 'file'.")
    edits: list[Edit] = Field(default_factory=list, description="Edits to the base file when mode is 'edits'.")
    summary: str = Field(default="", description="One line: what this kernel does differently.")


class Review(BaseModel):
    """The Critic's review of a candidate before it runs."""

    approve: bool
    issues: list[str] = Field(default_factory=list)
    advice: str = ""


class Explanation(BaseModel):
    """The Critic's finding after a run: what changed, expected against measured, and why."""

    hypothesis: str
    change: str
    explanation: str = Field(description="Why the measured result came out as it did.")
    lesson: str = Field(default="", description="What the next experiments should take from it.")
