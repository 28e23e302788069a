"""Prompt templates: versioned text files in llm/prompts/, named `<name>.v<N>.txt`.

A template is never edited in place once used: a change is a new file with the next version,
so every ledger row names the exact text it was sent (name, version and the text's hash).
Placeholders are `{name}` (str.format); a literal brace is doubled.

Untrusted text is fenced (llm/fencing.py). Every value that does not come from our own code (a
model's answer, a dataset's field, a question or check text, an entity or domain from an
import, a person's edit, a web page's words) is marked in the template, and render() puts it
in a fence that the text cannot close:

- `{response:fence}`: the text, between `<<<RESPONSE TAG` and `RESPONSE TAG>>>` lines (the
  placeholder's name in capitals; TAG is made from the text, so the same values always give
  the same prompt, which the ledger's cache and the judge's verdict keys need);
- `{snippets:fence_each}`: the value is a list of (key, text) pairs (or a dict), rendered as a
  `- key:` line and the text's own fence for each, "(none)" for none. The keys are ours (ids
  the model answers with) and stay outside; each text gets its fence, so a text cannot forge
  another id. Build the pairs in the caller, e.g. `[(s["id"], f"{s['title']}: {s['text']}")]`.
- Trusted values stay plain `{name}`: numbers, and choices our code makes (a tier).

A template that fences anything must state the fence: it carries FENCE_NOTE verbatim (copy
it from llm/fencing.py), and load_prompt refuses one that does not. Put the fenced value on
lines of its own, and refer to it by what it is ("the entity named above"), not by repeating the
placeholder inline. To fence a template that has none yet: write its next version with the
marks and FENCE_NOTE, and pass lists as pairs where a listing string was built; a job that
keeps an older version (its params' prompt_version) must still get the values that version
expects. A template rendered into another one's placeholder is held to the same rule, so
rather give its values to the host template as fenced placeholders. Code that reads values
back out of a prompt (the demo provider, the tests' fakes) uses fencing.fenced_texts and
fencing.outside_fences. llm/tests/test_fencing.py holds every latest template to this: each
placeholder fenced unless it is in its TRUSTED set, the note present, and texts that try to
close their fence staying inside.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import fencing
from .fencing import FENCE_NOTE

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
# Templates no job renders any more, and what took their place. Their files stay (the ledger
# names them, /prompts/ shows them); load_prompt refuses them, so their unfenced text is never
# sent again.
RETIRED = {
    "rubric_human_edits": "rubric_rebuild v3 lists the human changes itself, each text fenced",
}
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

    @property
    def fenced(self) -> list[str]:
        """The placeholders whose values render inside fences (`:fence`, `:fence_each`)."""
        return fencing.fenced_names(self.text)

    @property
    def states_fences(self) -> bool:
        """False for a template that fences text without saying so (FENCE_NOTE)."""
        return not self.fenced or FENCE_NOTE in self.text

    def render(self, **values: object) -> str:
        missing = [p for p in self.placeholders if p not in values]
        if missing:
            raise PromptError(f"prompt {self.name} v{self.version} needs {', '.join(missing)}")
        return render_text(self.text, values)


def render_text(text: str, values: Mapping[str, object]) -> str:
    """A template's text (or a part of it) filled in, its marked values fenced."""
    return fencing.render(text, values)


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
    if name in RETIRED:
        raise PromptError(f"prompt {name!r} is retired: {RETIRED[name]}")
    versions = sorted(v for n, v in _all() if n == name)
    if not versions:
        raise PromptError(f"no prompt template named {name!r} in {PROMPTS_DIR}")
    chosen = versions[-1] if version is None else version
    if (name, chosen) not in _all():
        raise PromptError(f"prompt {name!r} has no version {chosen} (has {versions})")
    prompt = _all()[(name, chosen)]
    if not prompt.states_fences:
        raise PromptError(
            f"prompt {name} v{chosen} fences {', '.join(prompt.fenced)} but does not say so: "
            "add llm.fencing.FENCE_NOTE to it, word for word"
        )
    return prompt


def all_prompts() -> list[Prompt]:
    """Every version of every template, by name then version: for the admins' prompts page."""
    return [p for _, p in sorted(_all().items())]
