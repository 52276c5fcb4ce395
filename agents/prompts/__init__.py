"""Prompt templates: one Markdown file per role, with a front matter naming its version.

    ---
    role: coder
    version: 1
    ---
    # system
    ...
    # user
    ... $placeholders ...

Placeholders use `string.Template` syntax ($name), so braces in kernel code need no escaping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

import yaml

PROMPTS_DIR = Path(__file__).resolve().parent

_SECTION = re.compile(r"^# (system|user)\s*$", re.MULTILINE)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    role: str
    version: int
    system: str
    user: Template

    @property
    def name(self) -> str:
        return f"{self.role}@v{self.version}"

    def render(self, **values: object) -> tuple[str, str]:
        """(system, user); every placeholder must be given."""
        try:
            user = self.user.substitute({k: str(v) for k, v in values.items()})
        except KeyError as exc:
            raise PromptError(f"prompt {self.name} needs a value for {exc.args[0]}") from exc
        return self.system, user


def parse_prompt(text: str, origin: str = "<text>") -> Prompt:
    if not text.startswith("---\n"):
        raise PromptError(f"{origin}: a prompt starts with a front matter block (---)")
    try:
        _, front, body = text.split("---\n", 2)
    except ValueError as exc:
        raise PromptError(f"{origin}: unterminated front matter") from exc
    meta = yaml.safe_load(front) or {}
    if "role" not in meta or "version" not in meta:
        raise PromptError(f"{origin}: front matter needs role and version")
    parts = _SECTION.split(body)
    sections = dict(zip(parts[1::2], (p.strip() for p in parts[2::2]), strict=True))
    if set(sections) != {"system", "user"}:
        raise PromptError(f"{origin}: needs exactly a '# system' and a '# user' section")
    return Prompt(str(meta["role"]), int(meta["version"]), sections["system"], Template(sections["user"]))


@cache
def load_prompt(role: str, directory: str | None = None) -> Prompt:
    path = Path(directory or PROMPTS_DIR) / f"{role}.md"
    if not path.is_file():
        raise PromptError(f"no prompt template for role {role!r} at {path}")
    return parse_prompt(path.read_text(), str(path))
