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
A paragraph of the user template (text between blank lines) whose placeholders are all given as
empty strings is left out whole, heading and fences included: a prompt never shows an empty block.
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
        """(system, user); every placeholder must be given, and paragraphs of empty ones are dropped."""
        texts = {k: str(v) for k, v in values.items()}
        missing = [name for name in self.placeholders() if name not in texts]
        if missing:
            raise PromptError(f"prompt {self.name} needs a value for {missing[0]}")
        kept = [p for p in _PARAGRAPH.split(self.user.template) if not _all_empty(p, texts)]
        return self.system, Template("\n\n".join(kept)).substitute(texts).strip()

    def placeholders(self) -> list[str]:
        return _names(self.user.template)


_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def _all_empty(paragraph: str, texts: dict[str, str]) -> bool:
    names = _names(paragraph)
    return bool(names) and all(texts.get(n) == "" for n in names)


def _names(text: str) -> list[str]:
    """The placeholders of a template text, in order ($name and ${name})."""
    return [m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)
            if m.group("named") or m.group("braced")]


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
