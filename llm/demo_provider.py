"""The `demo` provider: canned answers made offline, so that `make run` shows every LLM stage
working without a key or a network (the idea of inspect_ai's `mockllm`).

An answer is built from the request alone: the response schema the stage asks for and the
prompt it sent. Each stage's answer keeps the method's rules, so the stage runs to its end:

- generation: 3 distinct demo questions that name neither the entity nor the domain;
- the guard: one verdict per candidate id listed in the prompt, the first one selected;
- entity proposals: a demo name made from the row's answer, popularity unknown;
- rubric evidence and research (Google Search): three demo snippets with grounding metadata;
- the audit (URL context): "sN: verified" for each snippet listed, every URL retrieved;
- the layout: a fact, a strict list, a flexible list and a process citing the listed snippets,
  which the compiler accepts;
- the rebuild: every input item kept (citing only listed snippets), each change of a human
  round carried into the items (or dropped with a reason where the demo cannot), plus one new
  fact;
- judging: an answer text, and verdicts among the four, fixed by a hash of the prompt.

A schema without an answer of its own gets one built from its JSON Schema (every field filled,
the first choice of each enum), so a new stage still runs; give it an entry in ANSWERS when its
answer must keep a rule.

Every text says "demo", the model version is `demo`, and production refuses the provider: a
demo model must never stand in for a real one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from pydantic import BaseModel

from .fencing import fenced_texts, outside_fences
from .models import Provider
from .providers import (
    GatewayError,
    GatewaySettings,
    ImagePart,
    ModelConfig,
    Reply,
    Request,
    register_provider,
)

DEFAULT_DELAY_SECONDS = 0.3  # "a short delay": enough for the job page to show progress
MODEL_VERSION = "demo"
VERDICTS = ("meets", "partially_meets", "missing", "contradicts")


@register_provider(Provider.DEMO)
class DemoProvider:
    """A provider like the gateway's real ones (llm/providers.py): send(config, request) ->
    Reply. It makes up grounding metadata of the real shape, so it serves grounded calls."""

    supports_tools = True

    def __init__(self, conf: GatewaySettings | None = None) -> None:
        if settings.PRODUCTION:
            raise GatewayError(
                "the demo provider is refused in production (GAMUT_ENV="
                "production): configure a real model for this stage"
            )

    async def send(self, config: ModelConfig, request: Request) -> Reply:
        delay = float(config.parameters.get("demo_delay_seconds", DEFAULT_DELAY_SECONDS))
        if delay > 0:
            await asyncio.sleep(delay)
        prompt = prompt_text(request)
        grounding: dict[str, Any] = {}
        if request.tools:
            text, grounding = grounded_answer(prompt, request.tools)
        elif request.schema is None:
            text = free_text_answer(prompt)
        else:
            text = json.dumps(structured_answer(request.schema, prompt), ensure_ascii=False)
        return Reply(
            text=text,
            model_version=MODEL_VERSION,
            tokens_in=_tokens(prompt) + 258 * _images(request),
            tokens_out=_tokens(text),
            tokens_cached=0,
            grounding=grounding,
        )

    async def aclose(self) -> None:
        return None


def prompt_text(request: Request) -> str:
    return "\n".join(part for part in (request.system, *request.prompt) if isinstance(part, str))


def _images(request: Request) -> int:
    return sum(isinstance(part, ImagePart) for part in request.prompt)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]


def _field(prompt: str, name: str, default: str) -> str:
    """The value the prompt gives as `name`: its fence (`{name:fence}`), else a `name: value`
    line (templates from before fences)."""
    for label, text in fenced_texts(prompt):
        if label == name.upper():
            return " ".join(text.split()) or default
    found = re.search(rf"^\W*{name}:\s*(.+)$", prompt, re.IGNORECASE | re.MULTILINE)
    return found.group(1).strip() if found else default


def _snippet_ids(prompt: str) -> list[str]:
    """The snippet ids the prompt lists, in order: `- s3:` before a snippet's fence, or
    `[s3] title <url>: text` lines. Read outside the fences, so that a fenced text cannot add
    an id."""
    ours = outside_fences(prompt)
    ids = re.findall(
        r"^(?:- ([A-Za-z0-9_-]+):\n<<<SNIPPETS>>>|\[([A-Za-z0-9_-]+)\])", ours, re.MULTILINE
    )
    return list(dict.fromkeys(fenced or listed for fenced, listed in ids))


# ---------------------------------------------------------------------------------------------
# Free text and grounded answers.


def free_text_answer(prompt: str) -> str:
    question = _field(prompt, "question", "the question asked")
    return (
        "Demo answer from the offline demo provider (no model was called). "
        f"Asked: {question}\n\n"
        "It names what the photo shows, gives its main facts and how it is made or works, "
        "and lists the steps and options a careful answer would cover. This text is "
        f"canned for the demo, so its verdicts mean nothing. ({_digest(prompt)})"
    )


def grounded_answer(prompt: str, tools: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    if "url_context" in tools:
        # The audit: every listed snippet verified, every address retrieved.
        ids = _snippet_ids(prompt)
        text = (
            "\n".join(f"{sid}: verified - the demo source states it (demo audit)" for sid in ids)
            or "No snippet to audit (demo audit)."
        )
        urls = list(dict.fromkeys(re.findall(r"<(https?://[^>\s]+)>", prompt)))
        return text, {
            "chunks": [],
            "supports": [],
            "url_statuses": [[url, "URL_RETRIEVAL_STATUS_SUCCESS"] for url in urls],
        }
    entity = _field(prompt, "entity", "the entity")
    tag = _digest(prompt)
    slug = re.sub(r"[^a-z0-9]+", "-", entity.lower()).strip("-") or "entity"
    chunks, supports, lines = [], [], []
    for n, aspect in enumerate(("what it is", "how it is made", "how it is used"), start=1):
        chunks.append([f"https://example.org/demo/{slug}/{tag}/{n}", f"Demo source {n}: {entity}"])
        said = f"Demo evidence on {aspect} for {entity} ({tag}-{n})."
        supports.append([said, [n - 1]])
        lines.append(said)
    return "Demo research (no search was made). " + " ".join(lines), {
        "chunks": chunks,
        "supports": supports,
        "url_statuses": [],
    }


# ---------------------------------------------------------------------------------------------
# Structured answers, by the schema's title.


def _generated_questions(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    tag = _digest(prompt)
    return {
        "questions": [
            f"What is this thing in my photo, and what is the story behind it? (demo {tag}-1)",
            f"How is something like this made, step by step, and why does it last? (demo {tag}-2)",
            f"How do people use or look after what I'm showing here, and why? (demo {tag}-3)",
        ]
    }


def _guard(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    ids = [int(n) for n in re.findall(r"^- id (\d+):", outside_fences(prompt), re.MULTILINE)]
    verdicts = [
        {
            "id": pk,
            "passes_hard_requirements": True,
            "stranger_test_pass": True,
            "boilerplate": False,
            "reason": "Passes every requirement (demo guard).",
        }
        for pk in ids
    ]
    if ids:
        return {"verdicts": verdicts, "selected": ids[0], "new_candidates": []}
    return {
        "verdicts": [],
        "selected": None,
        "new_candidates": _generated_questions(schema, prompt)["questions"],
    }


def _entity_proposal(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    # The answer's first clause stands for the entity: the demo cannot look at the photo.
    answer = _field(prompt, "answer", "")
    clause = re.split(r"[,.;:!?]", answer, maxsplit=1)[0] if answer != "(none)" else ""
    clause = re.sub(r"^\s*(this|that|it)\s+(is|was|'s)\s+(an?|the)?\s*", "", clause, flags=re.I)
    words = re.findall(r"[A-Za-z0-9'-]+", clause)[:5]
    name = " ".join(words) or f"entity {_digest(prompt)}"
    return {
        "entity": f"{name} (demo)",
        "popularity": "unknown",
        "reason": "Made up from the row's answer by the offline demo provider (no model looked "
        "at the photo).",
    }


def _layout_items(entity: str, snippets: list[str]) -> list[dict[str, Any]]:
    def cite(n: int) -> list[str]:
        return [snippets[n % len(snippets)]] if snippets else []

    return [
        {
            "id": "I1",
            "type": "fact",
            "tier": "answer_critical",
            "snippets": cite(0),
            "statement": f"The photo shows {entity} (demo fact)",
        },
        {
            "id": "I2",
            "type": "strict_list",
            "tier": "answer_critical",
            "snippets": cite(1),
            "topic": f"the parts of {entity} (demo)",
            "items": ["its form", "its material"],
        },
        {
            "id": "I3",
            "type": "flexible_list",
            "tier": "valuable",
            "snippets": cite(2),
            "topic": f"ways people use {entity} (demo)",
            "options": ["every day", "on occasions", "as a collector"],
            "baseline": [1],
            "meta_insights": [
                {
                    "id": "M1",
                    "tier": "context",
                    "snippets": cite(0),
                    "statement": "How it is used follows from how it is made (demo)",
                }
            ],
        },
        {
            "id": "I4",
            "type": "process",
            "tier": "valuable",
            "snippets": cite(1),
            "topic": f"how {entity} is made (demo)",
            "steps": [
                {"text": "Gather the materials (demo step)", "required": True},
                {"text": "Shape and finish it (demo step)", "required": True},
                {"text": "Inspect the result (demo step)", "required": False},
            ],
        },
    ]


def _layout(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    return {"items": _layout_items(_field(prompt, "entity", "the entity"), _snippet_ids(prompt))}


def _input_items(prompt: str) -> list[dict[str, Any]]:
    """The input meta-rubric's items: its fence (`{meta_rubric:fence}`), else the first JSON
    array of items (objects with an id and a type) in the prompt (templates from before
    fences)."""
    for label, text in fenced_texts(prompt):
        if label == "META_RUBRIC":
            prompt = text  # only there: a fenced question cannot pose as the input's items
            break
    decoder = json.JSONDecoder()
    for found in re.finditer(r"^\[", prompt, re.MULTILINE):
        try:
            value, _ = decoder.raw_decode(prompt, found.start())
        except ValueError:
            continue
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) and "id" in v and "type" in v for v in value)
        ):
            return value
    return []


def _cited_only(item: dict[str, Any], listed: set[str]) -> dict[str, Any]:
    kept = {**item, "snippets": [s for s in item.get("snippets", []) if s in listed]}
    if item.get("meta_insights"):
        kept["meta_insights"] = [
            {**mi, "snippets": [s for s in mi.get("snippets", []) if s in listed]}
            for mi in item["meta_insights"]
        ]
    return kept


# A line of the rebuild's listing of human changes (rubric_rebuild v3, made by
# rubrics.human_changes.HumanChange.prompt_items), before the fence of one of its texts; the
# first line of a change says what it is, a further one only which text follows.
_CHANGE_LINE = re.compile(
    r"^- (?P<id>h\d+), (?P<change>add|edit|retier|delete): "
    r"(?:check (?P<check>[A-Za-z0-9_.-]+)(?: \(from (?P<meta_item>[A-Za-z0-9_-]+)\))? "
    r"(?:at tier (?P<tier>[a-z_]+)"
    r"|from tier (?P<tier_before>[a-z_]+) to tier (?P<tier_after>[a-z_]+)); )?"
    r"(?P<field>its text before|its text after|its text|the reviser's reason):"
    r"\n<<<HUMAN_CHANGES>>>$",
    re.MULTILINE,
)
_CHANGE_TEXTS = {
    "its text": "text",
    "its text before": "before",
    "its text after": "after",
    "the reviser's reason": "reason",
}


def _human_changes(prompt: str) -> list[dict[str, Any]]:
    """The human round's changes the rebuild's prompt lists, each as a dict of its fields (id,
    change, check, meta_item, tier, tier_before, text, before, after, reason: those it has),
    or none. The lines are read outside the fences and each text from its own, in order, so a
    text cannot add a change or a field."""
    texts = [text for label, text in fenced_texts(prompt) if label == "HUMAN_CHANGES"]
    lines = list(_CHANGE_LINE.finditer(outside_fences(prompt)))
    if len(lines) != len(texts):
        return []  # not a listing made by prompt_items
    changes: dict[str, dict[str, Any]] = {}
    for line, text in zip(lines, texts, strict=True):
        change = changes.setdefault(line["id"], {"id": line["id"], "change": line["change"]})
        if line["check"]:
            change["check"] = line["check"]
            if line["meta_item"]:
                change["meta_item"] = line["meta_item"]
            if line["tier_before"]:
                change |= {"tier_before": line["tier_before"], "tier": line["tier_after"]}
            else:
                change["tier"] = line["tier"]
        change[_CHANGE_TEXTS[line["field"]]] = text
    return list(changes.values())


# A check of a list's member, a process's step, a relationship's aspect: `<item>.<kind><k>`
# (rubrics/compiler.py names them so); the members' field and how many must remain.
_MEMBER = re.compile(r"^(?P<item>[A-Za-z0-9_-]+)\.(?P<kind>item|opt|step|aspect)(?P<k>\d+)$")
_MEMBERS = {
    "item": ("items", 1),
    "opt": ("options", 2),
    "step": ("steps", 1),
    "aspect": ("aspects", 1),
}
_DEMO_ONLY = (
    "The offline demo provider carries additions, and edits, re-tiers and deletions of facts, "
    "meta-insights and list members only; this one stays in the human round's history (demo)."
)


class _Carry:
    """The human changes carried into the items, as a careful model would, with what the code
    checks in mind: an added check becomes a fact item with the reviser's text at their tier;
    an edited or re-tiered fact or meta-insight gets the text or tier; an edited or re-tiered
    member leaves its list for a fact item with the reviser's text at their tier; a deletion
    removes what the check came from. What the demo cannot carry (a coverage or order check,
    a list left below its minimum) it drops, with that reason."""

    def __init__(self, items: list[dict[str, Any]], taken: set[str], snippets: list[str]) -> None:
        self.items, self.taken, self.listed = items, taken, snippets
        self.answers: list[dict[str, Any]] = []
        self.dropped: list[dict[str, str]] = []
        self.removed: dict[str, set[int]] = {}  # member positions (from 1) leaving each item
        self.added: list[dict[str, Any]] = []

    def entry(self, entry_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the item or meta-insight of this id, the item holding that meta-insight)."""
        for item in self.items:
            if item["id"] == entry_id:
                return item, None
            for insight in item.get("meta_insights") or []:
                if insight["id"] == entry_id:
                    return insight, item
        return None, None

    def new_id(self) -> str:
        number = 1 + len(self.taken)
        while f"I{number}" in self.taken:
            number += 1
        self.taken.add(f"I{number}")
        return f"I{number}"

    def fact(self, text: str, tier: str, cites: list[str]) -> str:
        new = self.new_id()
        self.added.append(
            {"id": new, "type": "fact", "tier": tier, "snippets": cites, "statement": text}
        )
        return new

    def answer(self, changes: list[dict[str, Any]], item: str = "", why: str = "") -> None:
        for change in changes:
            if why:
                self.answers.append({"id": change["id"], "outcome": "dropped", "reason": why})
            else:
                self.answers.append({"id": change["id"], "outcome": "carried", "item": item})

    def carry(self, changes: list[dict[str, Any]]) -> None:
        by_check: dict[str, list[dict[str, Any]]] = {}
        for change in changes:
            by_check.setdefault(change["check"], []).append(change)
        for check, group in by_check.items():
            last = group[-1]
            if last["change"] == "add":
                self.answer(group, self.fact(last["text"], last["tier"], self.listed[:1]))
            elif last["change"] == "delete":
                self.delete(check, last, group)
            else:
                self.reword(check, group)

    def reword(self, check: str, group: list[dict[str, Any]]) -> None:
        text = next((c["after"] for c in group if c["change"] == "edit"), None)
        tier = group[-1]["tier"]
        entry, _ = self.entry(check)
        if entry is not None and "statement" in entry:  # a fact or a meta-insight
            if text is not None:
                entry["statement"] = text
            entry["tier"] = tier
            self.answer(group, check)
            return
        member = _MEMBER.match(check)
        if member is None or not self.remove(member):
            self.answer(group, why=_DEMO_ONLY)
            return
        source, _ = self.entry(member["item"])
        assert source is not None
        said = text if text is not None else group[-1]["text"]
        self.answer(group, self.fact(said, tier, list(source.get("snippets", []))))

    def delete(self, check: str, change: dict[str, Any], group: list[dict[str, Any]]) -> None:
        entry, parent = self.entry(check)
        reason = change.get("reason") or "the reviser deleted it"
        if entry is not None and parent is not None:  # a meta-insight
            parent["meta_insights"] = [i for i in parent["meta_insights"] if i["id"] != check]
            self.dropped.append({"id": check, "reason": reason})
            self.answer(group, parent["id"])
        elif entry is not None and "statement" in entry:  # a fact
            self.items.remove(entry)
            self.dropped.append({"id": check, "reason": reason})
            self.answer(group)
        elif (member := _MEMBER.match(check)) is not None and self.remove(member):
            self.answer(group, member["item"])
        else:
            self.answer(group, why=_DEMO_ONLY)

    def remove(self, member: re.Match[str]) -> bool:
        """Mark a member to leave its item, when enough remain; False when not."""
        item, _ = self.entry(member["item"])
        field, minimum = _MEMBERS[member["kind"]]
        if item is None or field not in item:
            return False
        gone = self.removed.setdefault(item["id"], set())
        if len(item[field]) - len(gone | {int(member["k"])}) < minimum:
            return False
        gone.add(int(member["k"]))
        return True

    def finish(self) -> list[dict[str, Any]]:
        """The items with the members marked removed gone (thresholds kept within the options
        left), then the new facts."""
        for item in self.items:
            gone = self.removed.get(item["id"])
            if not gone:
                continue
            field = next(f for f, _ in _MEMBERS.values() if f in item)
            item[field] = [m for k, m in enumerate(item[field], 1) if k not in gone]
            if item["type"] == "flexible_list":
                n = len(item["options"])
                item["baseline"] = sorted({min(b, n) for b in item["baseline"]})
                item["extra_thresholds"] = None
        return self.items + self.added


def _rebuild(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    """Every input item kept (citing only listed snippets), each change of the human round
    carried (_Carry) or dropped with its reason, and one new fact from the new research."""
    snippets = _snippet_ids(prompt)
    listed = set(snippets)
    items = [_cited_only(item, listed) for item in _input_items(prompt)]
    if not items:
        return {
            "items": _layout_items(_field(prompt, "entity", "the entity"), snippets),
            "dropped": [],
            "human_changes": [],
        }
    taken = {item["id"] for item in items} | {
        mi["id"] for item in items for mi in item.get("meta_insights") or []
    }
    carry = _Carry(items, taken, snippets)
    carry.carry(_human_changes(prompt))
    items = carry.finish()
    items.append(
        {
            "id": carry.new_id(),
            "type": "fact",
            "tier": "context",
            "snippets": snippets[-1:],
            "statement": f"A further fact from the new research (demo, {_digest(prompt)})",
        }
    )
    return {"items": items, "dropped": carry.dropped, "human_changes": carry.answers}


def _audit(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    """The audit's verdicts: every snippet the prompt lists verified, nothing found partial
    (the demo's sources are made up with the snippets, so there is nothing to contradict)."""
    return {
        "verdicts": [
            {"id": sid, "verdict": "verified", "reason": "The demo source says it (demo)."}
            for sid in _snippet_ids(prompt)
        ],
        "partial_coverage": [],
    }


def _judge(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    verdict = VERDICTS[int(_digest(prompt), 16) % len(VERDICTS)]
    return {
        "verdict": verdict,
        "rationale": f"Demo verdict ({verdict}) from the offline demo provider: no model "
        "read the answer.",
    }


ANSWERS: dict[str, Callable[[type[BaseModel], str], dict[str, Any]]] = {
    "GeneratedQuestions": _generated_questions,
    "GuardOutput": _guard,
    "EntityProposal": _entity_proposal,
    "LayoutReply": _layout,
    "RebuildReply": _rebuild,
    "AuditReply": _audit,
    "JudgeReply": _judge,
}


def _title(schema: type[BaseModel]) -> str:
    return str(schema.model_config.get("title") or schema.__name__)


def structured_answer(schema: type[BaseModel], prompt: str) -> dict[str, Any]:
    build = ANSWERS.get(_title(schema))
    if build is not None:
        return build(schema, prompt)
    return from_json_schema(schema.model_json_schema(), prompt)


def from_json_schema(schema: dict[str, Any], prompt: str) -> Any:
    """A value that validates against a plain JSON Schema: every property given, arrays of
    their minimum length (at least one), the first choice of an enum or a union."""
    defs = schema.get("$defs", {})

    def build(node: dict[str, Any], name: str) -> Any:
        if "$ref" in node:
            return build(defs[node["$ref"].rsplit("/", 1)[-1]], name)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return node["enum"][0]
        for union in ("anyOf", "oneOf"):
            if union in node:
                options = [o for o in node[union] if o.get("type") != "null"] or node[union]
                return build(options[0], name)
        if "allOf" in node:
            return build(node["allOf"][0], name)
        kind = node.get("type")
        if kind == "object":
            return {key: build(sub, key) for key, sub in node.get("properties", {}).items()}
        if kind == "array":
            count = max(1, int(node.get("minItems", 1)))
            return [build(node.get("items", {}), name) for _ in range(count)]
        if kind == "integer":
            return max(1, int(node.get("minimum", 1)))
        if kind == "number":
            return float(node.get("minimum", 1))
        if kind == "boolean":
            return True
        return f"demo {name} ({_digest(prompt, name)})"

    return build(schema, "answer")
