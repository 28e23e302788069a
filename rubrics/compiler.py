"""The meta-rubric (schema_version 1), its validation, and its compilation into binary checks.

Pure Python: no Django import, so it is tested in milliseconds and reused by the import command,
the LLM jobs and the revision workspace alike. The contract is ../shared/spec/rubric-method.md,
sections 1-3; the method text it makes exact wins where the two disagree.

Entry points
    validate(document) -> MetaRubric       raises MetaRubricInvalid with every problem found
    compile_rubric(meta) -> list[Check]    the flat, ordered binary checklist
    to_json(checks) -> {"checks": [...]}   JSON-ready dicts with the fields the spec names
    MetaRubric.model_json_schema()         the document format, also what an LLM is asked for

Check ids
    A check's id is built from its item id and its position among that item's checks only, so
    compiling twice gives the same ids and editing one item never renumbers another's checks.
    Positions k count from 1 in document order.

    fact                  <id>
    strict_list           <id>.item<k>          k-th list item
    flexible_list         <id>.base<k>          k-th baseline threshold
                          <id>.opt<k>           k-th option (short lists)
                          <id>.cov<k>           k-th higher threshold (long or context lists)
    process               <id>.step<k>          k-th step, required or optional
                          <id>.seq_required     order of the required steps
                          <id>.seq_all          order of all steps
    relationship          <id>.entity, <id>.aspect<k>
    meta-insight          <its own id>

    Item and meta-insight ids may hold only letters, digits, '-' and '_': with no dot in them,
    an id like "I3.base1" can only ever be a check of item I3, so the scheme cannot collide.

Checks come out item by item in document order, each item's own checks first and then its
meta-insights'. Every check records the rule that made it (`rule`, e.g. "flexible_list.option"):
provenance for the revision workspace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from llm.schemas import names

SCHEMA_VERSION = 1

# ---------------------------------------------------------------------------------------------
# Tiers (spec section 1)

Tier = Literal["answer_critical", "valuable", "context"]
TIERS: tuple[Tier, ...] = get_args(Tier)  # highest first


def lower(tier: Tier) -> Tier:
    """The tier one level down; context stays context, as nothing lies beneath it."""
    return TIERS[min(TIERS.index(tier) + 1, len(TIERS) - 1)]


# ---------------------------------------------------------------------------------------------
# The document (spec section 2)

ID_PATTERN = r"^[A-Za-z0-9_-]+$"

Text = Annotated[str, StringConstraints(min_length=1)]
Id = Annotated[
    str,
    StringConstraints(min_length=1, pattern=ID_PATTERN),
    Field(description="Letters, digits, '-' and '_'; unique across items and meta-insights."),
]
# Each citation names one snippet id of the document: marked so, an LLM's response schema lists
# the ids that exist (llm/schemas.py); the validation below checks them anyway.
SnippetRefs = Annotated[
    list[Annotated[Text, Field(json_schema_extra=names("snippets"))]],
    Field(description="Ids of the top-level snippets that support this."),
]
Count = Annotated[int, Field(ge=1)]


def _schema_version_is_1(value: int) -> int:
    if value != SCHEMA_VERSION:
        raise PydanticCustomError(
            "schema_version",
            "unsupported schema_version {value}; this compiler reads version 1",
            {"value": value},
        )
    return value


class _Strict(BaseModel):
    # strict: a JSON string "2" is not the number 2, nor 1 the boolean true ("wrong JSON type").
    # extra="forbid": a misspelt field such as "extra_threshold" would otherwise be dropped
    # silently and the defaults used; rejecting it also gives the LLM a closed schema.
    model_config = ConfigDict(strict=True, extra="forbid", str_strip_whitespace=True, frozen=True)


WEB_SCHEMES = ("http", "https")


def is_web_url(url: Any) -> bool:
    """Whether `url` is an absolute http(s) address: the only kind evidence may link to (a
    `javascript:` or `data:` URL in a link would run or show whatever it holds)."""
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # e.g. an unbalanced [ in the host
        return False
    return parts.scheme.lower() in WEB_SCHEMES and bool(parts.hostname)


def _web_url(value: str) -> str:
    if not is_web_url(value):
        raise PydanticCustomError(
            "snippet_url", "must be an http or https URL, not {value}", {"value": _show(value)}
        )
    return value


class Snippet(_Strict):
    """A short piece of web evidence that items cite by id."""

    id: Text
    url: Annotated[Text, AfterValidator(_web_url), Field(description="An http or https address.")]
    title: str = ""
    text: Text = Field(description="The quoted evidence, short.")


class MetaInsight(_Strict):
    """A synthesis across a list's or process's members that no single member captures."""

    id: Id
    statement: Text = Field(description="The insight as one self-contained sentence.")
    tier: Tier
    snippets: SnippetRefs = Field(
        default_factory=list, description="Own evidence; when absent or empty, the parent's."
    )


class _Item(_Strict):
    id: Id
    type: str
    tier: Tier
    snippets: SnippetRefs = Field(default_factory=list)
    note: str = Field(default="", description="Free remarks for reviewers; never compiled.")


TOPIC_HELP = (
    "What the members are, as a noun phrase that reads well after 'one of the' or 'the', "
    "e.g. 'core ingredients of beef bourguignon' or 'preparation of beef bourguignon'."
)


class Fact(_Item):
    """One discrete fact."""

    type: Literal["fact"]
    statement: Text = Field(description="The fact as one self-contained sentence.")


class StrictList(_Item):
    """A finite set in which every member is required."""

    type: Literal["strict_list"]
    topic: Text = Field(description=TOPIC_HELP)
    items: list[Text] = Field(min_length=1)
    meta_insights: list[MetaInsight] = Field(default_factory=list)


class FlexibleList(_Item):
    """A pool of valid options: enough coverage is required, no single option is."""

    type: Literal["flexible_list"]
    topic: Text = Field(description=TOPIC_HELP)
    options: list[Text] = Field(min_length=2)
    baseline: list[Count] = Field(
        min_length=1,
        max_length=2,
        description="1 or 2 increasing minimum counts of options, each at most len(options).",
    )
    extra_thresholds: list[Count] | None = Field(
        default=None,
        description=(
            "Higher coverage thresholds for long or context-tier lists: increasing, above "
            "max(baseline), at most len(options). Omit for the defaults (40/60/80 %)."
        ),
    )
    meta_insights: list[MetaInsight] = Field(default_factory=list)


class Step(_Strict):
    text: Text = Field(description="The step, self-contained.")
    required: bool


class Process(_Item):
    """An ordered sequence of steps in which the order carries meaning."""

    type: Literal["process"]
    topic: Text = Field(description=TOPIC_HELP)
    steps: list[Step] = Field(min_length=1, description="In order.")
    meta_insights: list[MetaInsight] = Field(default_factory=list)


class Relationship(_Item):
    """A connection or contrast between the question's entity and another."""

    type: Literal["relationship"]
    entity: Text = Field(description="The related entity.")
    relation: Text = Field(description="How the two are connected, briefly.")
    aspects: list[Text] = Field(min_length=1, description="One statement per aspect.")


Item = Annotated[
    Fact | StrictList | FlexibleList | Process | Relationship, Field(discriminator="type")
]
ITEM_MODELS: dict[str, type[_Item]] = {
    get_args(model.model_fields["type"].annotation)[0]: model
    for model in (Fact, StrictList, FlexibleList, Process, Relationship)
}
WithInsights = StrictList | FlexibleList | Process


class MetaRubric(_Strict):
    """A meta-rubric document, schema_version 1.

    Build it with validate(): model_validate() alone checks the shape (types, required fields,
    tiers) but not the rules that relate fields to each other (unique ids, snippet references,
    thresholds, duplicate members), and compile_rubric() relies on those.
    """

    schema_version: Annotated[
        int, AfterValidator(_schema_version_is_1), Field(json_schema_extra={"const": 1})
    ]
    question: Text
    entity: Text = Field(description="The entity the question is about.")
    snippets: list[Snippet] = Field(default_factory=list)
    items: list[Item] = Field(min_length=1)


# ---------------------------------------------------------------------------------------------
# Validation


@dataclass(frozen=True, slots=True)
class Problem:
    path: str  # JSON path in the spec's style: items[3].baseline[0]; "document" for the root
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class MetaRubricInvalid(ValueError):
    """The document was rejected as a whole; `problems` lists every reason found."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


Loc = tuple[str | int, ...]


def validate(document: Any) -> MetaRubric:
    """Parse a decoded JSON document into a MetaRubric, or raise MetaRubricInvalid.

    Two passes, both always run so that one round of fixes can address every problem: pydantic
    checks the shape, then _rule_problems() checks the rules across fields over whatever parts
    are well-formed (a malformed part is already reported, and would only add noise).
    """
    found: list[tuple[Loc, str]] = []
    meta: MetaRubric | None = None
    try:
        meta = MetaRubric.model_validate(document)
    except ValidationError as exc:
        found.extend(_shape_problem(error) for error in exc.errors())
    found.extend(_rule_problems(document))
    if found:
        # Group by top-level field and item, so that an item's problems are read together;
        # the sort is stable, so within an item they stay in the order found.
        found.sort(key=lambda problem: _document_order(problem[0]))
        raise MetaRubricInvalid([Problem(_path(loc), message) for loc, message in found])
    assert meta is not None  # nothing was found, so the shape passed
    return meta


def _document_order(loc: Loc) -> tuple[int, int]:
    fields = list(MetaRubric.model_fields)
    head = loc[0] if loc else ""
    rank = fields.index(head) if head in fields else -1
    index = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else -1
    return rank, index


def _path(loc: Loc) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "document"


def _show(value: Any) -> str:
    """A value as it appears in the JSON document."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "an object"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean (true or false)",
    "list_type": "a list",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
}
TYPE_NAMES = ", ".join(ITEM_MODELS)
TIER_NAMES = ", ".join(TIERS)


def _shape_problem(error: ErrorDetails) -> tuple[Loc, str]:
    """Translate one pydantic error into the spec's path form and a message for people."""
    loc: Loc = tuple(error["loc"])
    # The discriminated union puts the item's type tag into the location (items.3.fact.topic);
    # the document has no such level, so it goes.
    tag: str | None = None
    if len(loc) > 2 and loc[0] == "items" and loc[2] in ITEM_MODELS:
        tag = str(loc[2])
        loc = loc[:2] + loc[3:]
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx", {})
    if kind in EXPECTED:
        return loc, f"expected {EXPECTED[kind]}, got {_json_kind(value)}"
    if kind == "missing":
        return loc, "required field is missing"
    if kind == "union_tag_not_found":
        return loc + ("type",), f"required field is missing (one of {TYPE_NAMES})"
    if kind == "union_tag_invalid":
        given = value.get("type") if isinstance(value, dict) else ctx["tag"]
        return loc + ("type",), f"unknown type {_show(given)}; expected one of {TYPE_NAMES}"
    if kind == "literal_error" and loc and loc[-1] == "tier":
        return loc, f"unknown tier {_show(value)}; expected one of {TIER_NAMES}"
    if kind == "string_too_short":
        return loc, "must not be empty"
    if kind in ("too_short", "too_long"):
        bound = ctx["min_length"] if kind == "too_short" else ctx["max_length"]
        most = "least" if kind == "too_short" else "most"
        return loc, f"needs at {most} {_entries(bound, loc)}, has {ctx['actual_length']}"
    if kind == "greater_than_equal":
        return loc, f"must be at least {ctx['ge']}, not {_show(value)}"
    if kind == "string_pattern_mismatch":
        return loc, f"{_show(value)} is not a valid id: use only letters, digits, '-' and '_'"
    if kind == "extra_forbidden":
        return loc, _unknown_field(loc, tag)
    return loc, error["msg"]


def _entries(count: int, loc: Loc) -> str:
    # Lists named by a plural noun (options, steps, ...) count in that noun.
    noun = "values" if loc[-1:] == ("baseline",) else str(loc[-1]) if loc else "entries"
    return f"{count} {noun[:-1] if count == 1 else noun}"


def _unknown_field(loc: Loc, tag: str | None) -> str:
    """Name the fields that are allowed where an unknown one was found: the model is named by
    the last text part of the path above the field, or for an item by its type tag."""
    parent = next((part for part in reversed(loc[:-1]) if isinstance(part, str)), None)
    models: dict[str | None, tuple[str, type[BaseModel]]] = {
        None: ("the document", MetaRubric),
        "snippets": ("a snippet", Snippet),
        "meta_insights": ("a meta-insight", MetaInsight),
        "steps": ("a step", Step),
    }
    if parent == "items" and tag is not None:
        models["items"] = (f"a {tag} item", ITEM_MODELS[tag])
    if parent not in models:
        return "unknown field"
    what, model = models[parent]
    return f"unknown field; {what} has {', '.join(model.model_fields)}"


def _rule_problems(document: Any) -> Iterator[tuple[Loc, str]]:
    """The rules pydantic's shape checks cannot express, over the raw decoded document.

    Written defensively: anything of the wrong shape is skipped here, as pydantic reports it.
    """
    if not isinstance(document, dict):
        return
    items = document.get("items")
    items = items if isinstance(items, list) else []
    raw_snippets = document.get("snippets", [])
    snippet_ids: set[str] | None = None  # None: the snippets are malformed; skip references
    if isinstance(raw_snippets, list):
        snippet_ids = set()
        first_seen: dict[str, Loc] = {}
        for k, snippet in enumerate(raw_snippets):
            sid = _text(snippet.get("id")) if isinstance(snippet, dict) else None
            if sid is None:
                continue
            loc: Loc = ("snippets", k, "id")
            if sid in first_seen:
                yield loc, f"duplicate snippet id {_show(sid)} (also at {_path(first_seen[sid])})"
            first_seen.setdefault(sid, loc)
            snippet_ids.add(sid)

    seen_ids: dict[str, Loc] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        owners = [(("items", i), item)] + [
            (("items", i, "meta_insights", j), insight)
            for j, insight in enumerate(_list(item.get("meta_insights")))
            if isinstance(insight, dict)
        ]
        for base, owner in owners:
            yield from _id_problems(base, owner, seen_ids)
            if snippet_ids is not None:
                yield from _reference_problems(base, owner, snippet_ids)
        kind = item.get("type")
        if kind == "strict_list":
            yield from _duplicate_members(("items", i, "items"), _list(item.get("items")))
        elif kind == "flexible_list":
            yield from _duplicate_members(("items", i, "options"), _list(item.get("options")))
            if isinstance(item.get("options"), list):
                yield from _threshold_problems(("items", i), item)
        elif kind == "process":
            steps = [
                step.get("text") if isinstance(step, dict) else None
                for step in _list(item.get("steps"))
            ]
            yield from _duplicate_members(("items", i, "steps"), steps, suffix=("text",))
        elif kind == "relationship":
            yield from _duplicate_members(("items", i, "aspects"), _list(item.get("aspects")))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    """A string as the model will hold it (stripped), or None when it is no usable string."""
    return (value.strip() or None) if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    # bool is an int in Python but not a number in JSON
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _id_problems(
    base: Loc, owner: dict[str, Any], seen: dict[str, Loc]
) -> Iterator[tuple[Loc, str]]:
    oid = _text(owner.get("id"))
    if oid is None:
        return
    loc = base + ("id",)
    if oid in seen:
        yield loc, f"duplicate id {_show(oid)} (also at {_path(seen[oid])})"
    else:
        seen[oid] = loc


def _reference_problems(
    base: Loc, owner: dict[str, Any], defined: set[str]
) -> Iterator[tuple[Loc, str]]:
    for k, ref in enumerate(_list(owner.get("snippets"))):
        sid = _text(ref)
        if sid is not None and sid not in defined:
            yield (
                base + ("snippets", k),
                (f"unknown snippet {_show(sid)}: no top-level snippet has this id"),
            )


def member_key(text: str) -> str:
    """Members are the same when they differ only in case and spacing ("Red wine", "redwine")."""
    return "".join(text.split()).casefold()


def _duplicate_members(
    base: Loc, members: Sequence[Any], suffix: Loc = ()
) -> Iterator[tuple[Loc, str]]:
    first: dict[str, int] = {}
    for k, member in enumerate(members):
        text = _text(member)
        if text is None:
            continue
        key = member_key(text)
        if key in first:
            yield (
                base + (k,) + suffix,
                (
                    f"{_show(text)} repeats {_path(base + (first[key],) + suffix)} "
                    "(compared ignoring case and spaces)"
                ),
            )
        else:
            first[key] = k


def _threshold_problems(base: Loc, item: dict[str, Any]) -> Iterator[tuple[Loc, str]]:
    n = len(item["options"])
    baseline = [_count(value) for value in _list(item.get("baseline"))]
    yield from _threshold_list(base + ("baseline",), baseline, n, floor=None)
    top = max((b for b in baseline if b is not None), default=None)
    extra = [_count(value) for value in _list(item.get("extra_thresholds"))]
    yield from _threshold_list(base + ("extra_thresholds",), extra, n, floor=top)


def _threshold_list(
    base: Loc, values: list[int | None], n: int, floor: int | None
) -> Iterator[tuple[Loc, str]]:
    """Each value at most n, above floor (the highest baseline value), and increasing."""
    previous: int | None = None
    for k, value in enumerate(values):
        if value is None:  # not an integer: reported with the shape
            previous = None
            continue
        if value > n:
            yield base + (k,), f"{value} exceeds the {n} option{'' if n == 1 else 's'}"
        if floor is not None and value <= floor:
            yield base + (k,), f"{value} is not above the highest baseline value, {floor}"
        if previous is not None and value <= previous:
            yield (
                base + (k,),
                (
                    f"{value} is not greater than the value before it, {previous} "
                    "(the values must increase)"
                ),
            )
        previous = value


# ---------------------------------------------------------------------------------------------
# Compilation (spec section 3)

Kind = Literal[
    "fact",
    "list_item",
    "coverage",
    "option",
    "step",
    "sequence",
    "relation_entity",
    "relation_aspect",
    "meta_insight",
]
Rule = Literal[
    "fact",
    "strict_list.item",
    "flexible_list.baseline",
    "flexible_list.option",
    "flexible_list.higher_threshold",
    "process.step_required",
    "process.step_optional",
    "process.sequence_required",
    "process.sequence_all",
    "relationship.entity",
    "relationship.aspect",
    "meta_insight",
]
SHORT_LIST_MAX = 7  # the method text: a short list has at most seven options


@dataclass(frozen=True, slots=True)
class Check:
    """One binary check, self-contained for a judge."""

    id: str
    kind: Kind
    tier: Tier
    secondary: bool
    source: str  # the id of the item or meta-insight that made it
    rule: Rule
    text: str
    snippets: tuple[str, ...]
    threshold: int | None = None  # coverage checks
    options: tuple[str, ...] | None = None  # coverage checks: all n options
    steps: tuple[str, ...] | None = None  # sequence checks, in order

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "tier": self.tier,
            "secondary": self.secondary,
            "source": self.source,
            "rule": self.rule,
            "text": self.text,
            "snippets": list(self.snippets),
        }
        if self.kind == "coverage":
            data["threshold"] = self.threshold
            data["options"] = list(self.options or ())
        if self.kind == "sequence":
            data["steps"] = list(self.steps or ())
        return data


def compile_rubric(meta: MetaRubric) -> list[Check]:
    """The flat, ordered checklist of a validated meta-rubric."""
    checks: list[Check] = []
    for item in meta.items:
        checks.extend(_item_checks(item, meta.entity))
        if isinstance(item, WithInsights):
            checks.extend(_insight_check(insight, item) for insight in item.meta_insights)
    return checks


def compile_document(document: Any) -> list[Check]:
    """validate() then compile_rubric(); raises MetaRubricInvalid."""
    return compile_rubric(validate(document))


def to_json(checks: Iterable[Check]) -> dict[str, list[dict[str, Any]]]:
    """{"checks": [...]}, ready for json.dumps."""
    return {"checks": [check.to_dict() for check in checks]}


def default_thresholds(n: int, baseline: Sequence[int]) -> list[int]:
    """ceil(0.4n), ceil(0.6n), ceil(0.8n), distinct and above max(baseline).

    Integer arithmetic, because in floating point 0.4 * 15 is 6.000000000000001 and would
    round up to 7.
    """
    values = sorted({-(-fifths * n // 5) for fifths in (2, 3, 4)})
    return [value for value in values if value > max(baseline)]


def higher_thresholds(item: FlexibleList) -> list[int]:
    if item.extra_thresholds is not None:
        return list(item.extra_thresholds)
    return default_thresholds(len(item.options), item.baseline)


def uses_option_checks(item: FlexibleList) -> bool:
    """Short lists credit each option; a context list has no lower tier for them, so it is
    treated like a long one."""
    return len(item.options) <= SHORT_LIST_MAX and item.tier != "context"


def _item_checks(item: _Item, entity: str) -> list[Check]:
    match item:
        case Fact():
            return [_check(item, item.id, "fact", "fact", _fact_text(item.statement))]
        case StrictList():
            return [
                _check(
                    item,
                    f"{item.id}.item{k}",
                    "list_item",
                    "strict_list.item",
                    _member_text(member, item.topic),
                )
                for k, member in enumerate(item.items, 1)
            ]
        case FlexibleList():
            return _flexible_checks(item)
        case Process():
            return _process_checks(item)
        case Relationship():
            return _relationship_checks(item, entity)
    raise TypeError(f"not a meta-rubric item: {item!r}")


def _check(
    item: _Item,
    check_id: str,
    kind: Kind,
    rule: Rule,
    text: str,
    *,
    secondary: bool = False,
    **by_kind: Any,
) -> Check:
    """A check of an item: genuine requirements keep its tier, secondary ones drop a level."""
    tier = lower(item.tier) if secondary else item.tier
    return Check(
        id=check_id,
        kind=kind,
        tier=tier,
        secondary=secondary,
        source=item.id,
        rule=rule,
        text=text,
        snippets=tuple(item.snippets),
        **by_kind,
    )


def _flexible_checks(item: FlexibleList) -> list[Check]:
    options = tuple(item.options)

    def coverage(check_id: str, rule: Rule, threshold: int, secondary: bool) -> Check:
        return _check(
            item,
            check_id,
            "coverage",
            rule,
            _coverage_text(threshold, options, item.topic),
            secondary=secondary,
            threshold=threshold,
            options=options,
        )

    checks = [
        coverage(f"{item.id}.base{k}", "flexible_list.baseline", b, False)
        for k, b in enumerate(item.baseline, 1)
    ]
    if uses_option_checks(item):
        checks += [
            _check(
                item,
                f"{item.id}.opt{k}",
                "option",
                "flexible_list.option",
                _member_text(option, item.topic),
                secondary=True,
            )
            for k, option in enumerate(options, 1)
        ]
    else:
        checks += [
            coverage(f"{item.id}.cov{k}", "flexible_list.higher_threshold", h, True)
            for k, h in enumerate(higher_thresholds(item), 1)
        ]
    return checks


def _process_checks(item: Process) -> list[Check]:
    checks = [
        _check(
            item,
            f"{item.id}.step{k}",
            "step",
            "process.step_required" if step.required else "process.step_optional",
            _step_text(step.text, item.topic),
            secondary=not step.required,
        )
        for k, step in enumerate(item.steps, 1)
    ]
    required = tuple(step.text for step in item.steps if step.required)
    every = tuple(step.text for step in item.steps)
    if len(required) >= 2:
        checks.append(
            _check(
                item,
                f"{item.id}.seq_required",
                "sequence",
                "process.sequence_required",
                _sequence_text(required, item.topic, every=False),
                steps=required,
            )
        )
    if len(required) < len(every) and len(every) >= 2:
        checks.append(
            _check(
                item,
                f"{item.id}.seq_all",
                "sequence",
                "process.sequence_all",
                _sequence_text(every, item.topic, every=True),
                secondary=True,
                steps=every,
            )
        )
    return checks


def _relationship_checks(item: Relationship, entity: str) -> list[Check]:
    checks = [
        _check(
            item,
            f"{item.id}.entity",
            "relation_entity",
            "relationship.entity",
            f"The response identifies {item.entity} as related to {entity}: "
            f"{_sentence(item.relation)}",
        )
    ]
    checks += [
        _check(
            item,
            f"{item.id}.aspect{k}",
            "relation_aspect",
            "relationship.aspect",
            f"On how {entity} relates to {item.entity}, the response conveys: {_sentence(aspect)}",
        )
        for k, aspect in enumerate(item.aspects, 1)
    ]
    return checks


def _insight_check(insight: MetaInsight, parent: StrictList | FlexibleList | Process) -> Check:
    return Check(
        id=insight.id,
        kind="meta_insight",
        tier=insight.tier,
        secondary=False,
        source=insight.id,
        rule="meta_insight",
        text=f"The response conveys this overall insight about the {_topic(parent.topic)}: "
        f"{_sentence(insight.statement)}",
        snippets=tuple(insight.snippets or parent.snippets),
    )


# Check texts. Each must stand alone for a judge who sees nothing else, so each names its topic
# and enumerates what it asks about. Members are quoted rather than re-cased: "iPhone" or
# "Burgundy" must survive untouched.


def _sentence(text: str) -> str:
    return text if text[-1] in ".!?" else f"{text}."


def _topic(topic: str) -> str:
    # Texts put "the" before the topic themselves; a topic written "the core ingredients"
    # would otherwise read "one of the the core ingredients".
    return topic[4:] if topic[:4].casefold() == "the " else topic


def _members(members: Sequence[str]) -> str:
    # Commas read best, unless a member holds a comma itself.
    separator = "; " if any("," in member for member in members) else ", "
    return separator.join(member.rstrip(".") for member in members)


def _fact_text(statement: str) -> str:
    return f"The response conveys this fact: {_sentence(statement)}"


def _member_text(member: str, topic: str) -> str:
    return f'The response mentions "{member}" as one of the {_topic(topic)}.'


def _coverage_text(threshold: int, options: Sequence[str], topic: str) -> str:
    how_many = f"all {threshold}" if threshold == len(options) else f"at least {threshold}"
    return (
        f"The response mentions {how_many} of the following {_topic(topic)}: {_members(options)}."
    )


def _step_text(step: str, topic: str) -> str:
    return f"In describing the {_topic(topic)}, the response mentions this step: {_sentence(step)}"


def _sequence_text(steps: Sequence[str], topic: str, *, every: bool) -> str:
    numbered = "; ".join(f"({k}) {step.rstrip('.')}" for k, step in enumerate(steps, 1))
    # Over the required steps only, optional ones may rightly sit between them.
    which = (
        "all of these steps in this order"
        if every
        else ("these steps in this order (other steps may come between them)")
    )
    return f"In describing the {_topic(topic)}, the response gives {which}: {numbered}."
