"""Prompt templates: versioned text files in llm/prompts/, named `<name>.v<N>.txt`.

A template is never edited in place once used: a change is a new file with the next version,
so every ledger row names the exact text it was sent (name, version and the text's hash).
Placeholders are `{name}` (str.format); a literal brace is doubled.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
_FILE = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)\.txt$")


class PromptError(LookupError):
    """A template that does not exist, or a render missing one of its placeholders."""


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def placeholders(self) -> list[str]:
        return sorted({field for _, field, _, _ in string.Formatter().parse(self.text) if field})

    def render(self, **values: object) -> str:
        missing = [p for p in self.placeholders if p not in values]
        if missing:
            raise PromptError(f"prompt {self.name} v{self.version} needs {', '.join(missing)}")
        return self.text.format(**values)


@cache
def _all(directory: Path = PROMPTS_DIR) -> dict[tuple[str, int], Prompt]:
    prompts = {}
    for path in sorted(directory.glob("*.txt")):
        match = _FILE.match(path.name)
        if match:
            key = (match["name"], int(match["version"]))
            prompts[key] = Prompt(key[0], key[1], path.read_text(encoding="utf-8"))
    return prompts


def load_prompt(name: str, version: int | None = None) -> Prompt:
    """The template `name` at `version`, or its latest version."""
    versions = sorted(v for n, v in _all() if n == name)
    if not versions:
        raise PromptError(f"no prompt template named {name!r} in {PROMPTS_DIR}")
    chosen = versions[-1] if version is None else version
    if (name, chosen) not in _all():
        raise PromptError(f"prompt {name!r} has no version {chosen} (has {versions})")
    return _all()[(name, chosen)]


def all_prompts() -> list[Prompt]:
    """Every version of every template, by name then version: for the admins' prompts page."""
    return [p for _, p in sorted(_all().items())]
