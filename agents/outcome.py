"""What a role returns: its typed value, whether the LLM or the fallback produced it, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    value: T
    by: str  # "llm" or "fallback"
    error: str | None = None  # why the fallback was used, or what was wrong with the reply

    def to_dict(self) -> dict[str, object]:
        value = self.value.model_dump() if hasattr(self.value, "model_dump") else self.value
        return {"value": value, "by": self.by, "error": self.error}
