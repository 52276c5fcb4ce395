"""How a role reaches its model, as plain data: the command line reads run configurations with it
without importing the LLM client (openai, LangChain), which costs seconds at start-up."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LLMConfig(BaseModel):
    """How one role talks to its model. The key itself never lives here, only the variable's name."""

    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = 0.2  # None: leave to the server (some reasoning models accept no other)
    max_tokens: int | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff_s: float = Field(default=1.0, ge=0)
    structured_method: Literal["auto", "json_schema", "function_calling", "json_mode", "text"] = "auto"
    price_input_per_mtok: float = Field(default=0.0, ge=0)
    price_output_per_mtok: float = Field(default=0.0, ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.price_input_per_mtok + output_tokens * self.price_output_per_mtok) / 1e6
