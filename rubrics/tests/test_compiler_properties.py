"""Properties of compilation over generated valid meta-rubrics (hypothesis).

The expected check counts come from expected_count(), written from the spec's table over the
raw document and sharing no code with the compiler, so the two check each other.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rubrics.compiler import TIERS, Check, compile_rubric, lower, to_json, validate

FAST = settings(max_examples=100, deadline=None)

tiers = st.sampled_from(TIERS)
words = st.text(alphabet="abcdefghij XYZ", min_size=1, max_size=12).map(str.strip).filter(bool)
ids = st.text(alphabet="AIMab019_-", min_size=1, max_size=4)
SNIPPET_IDS = ["s1", "s2", "s3"]
snippet_refs = st.lists(st.sampled_from(SNIPPET_IDS), max_size=2, unique=True)


def same_member(text: str) -> str:
    return "".join(text.split()).lower()


def members(min_size: int, max_size: int) -> st.SearchStrategy[list[str]]:
    return st.lists(words, min_size=min_size, max_size=max_size, unique_by=same_member)


@st.composite
def insights(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Meta-insights without ids: ids are given out once the whole document is drawn."""
    drawn = []
    for _ in range(draw(st.integers(0, 2))):
        insight = {"statement": draw(words), "tier": draw(tiers)}
        if draw(st.booleans()):
            insight["snippets"] = draw(snippet_refs)
        drawn.append(insight)
    return drawn


@st.composite
def flexible_lists(draw: st.DrawFn) -> dict[str, Any]:
    options = draw(members(2, 12))
    n = len(options)
    baseline = sorted(draw(st.lists(st.integers(1, n), min_size=1, max_size=2, unique=True)))
    item = {
        "type": "flexible_list",
        "topic": draw(words),
        "options": options,
        "baseline": baseline,
        "meta_insights": draw(insights()),
    }
    if draw(st.booleans()):
        above = list(range(max(baseline) + 1, n + 1))
        item["extra_thresholds"] = sorted(
            draw(st.lists(st.sampled_from(above), unique=True)) if above else []
        )
    return item


@st.composite
def processes(draw: st.DrawFn) -> dict[str, Any]:
    texts = draw(members(1, 6))
    return {
        "type": "process",
        "topic": draw(words),
        "meta_insights": draw(insights()),
        "steps": [{"text": text, "required": draw(st.booleans())} for text in texts],
    }


@st.composite
def item_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("fact"), "statement": words}),
            st.fixed_dictionaries(
                {
                    "type": st.just("strict_list"),
                    "topic": words,
                    "items": members(1, 6),
                    "meta_insights": insights(),
                }
            ),
            flexible_lists(),
            processes(),
            st.fixed_dictionaries(
                {
                    "type": st.just("relationship"),
                    "entity": words,
                    "relation": words,
                    "aspects": members(1, 4),
                }
            ),
        )
    )
    return {"tier": draw(tiers), "snippets": draw(snippet_refs), **body}


def id_count(bodies: list[dict[str, Any]]) -> int:
    return sum(1 + len(body.get("meta_insights", [])) for body in bodies)


def with_ids(body: dict[str, Any], fresh: list[str]) -> dict[str, Any]:
    """The body with an item id and its meta-insights' ids taken from the front of fresh."""
    item = {"id": fresh.pop(0), **body}
    if "meta_insights" in body:
        item["meta_insights"] = [
            {"id": fresh.pop(0), **insight} for insight in body["meta_insights"]
        ]
    return item


@st.composite
def documents_and_edits(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid document, and the same document with one item replaced by another of the same
    id (any type, tier or members; its meta-insights get ids unused elsewhere)."""
    bodies = draw(st.lists(item_bodies(), min_size=1, max_size=8))
    replacement = draw(item_bodies())
    fresh = draw(
        st.lists(
            ids,
            min_size=id_count(bodies + [replacement]),
            max_size=id_count(bodies + [replacement]),
            unique=True,
        )
    )
    items = [with_ids(body, fresh) for body in bodies]
    edited_at = draw(st.integers(0, len(items) - 1))
    edited = [*items]
    edited[edited_at] = with_ids(replacement, [items[edited_at]["id"], *fresh])
    snippets = [
        {"id": sid, "url": f"https://example.org/{sid}", "text": "evidence"} for sid in SNIPPET_IDS
    ]
    head = {"schema_version": 1, "question": "What is it?", "entity": "It", "snippets": snippets}
    return {**head, "items": items}, {**head, "items": edited}


documents = documents_and_edits().map(lambda pair: pair[0])


def expected_count(item: dict[str, Any]) -> int:
    """The spec's table, over the raw item."""
    insights_ = len(item.get("meta_insights", []))
    match item["type"]:
        case "fact":
            return 1
        case "strict_list":
            return len(item["items"]) + insights_
        case "flexible_list":
            n, baseline = len(item["options"]), item["baseline"]
            if n <= 7 and item["tier"] != "context":
                extra = n
            elif item.get("extra_thresholds") is not None:
                extra = len(item["extra_thresholds"])
            else:
                extra = len(
                    {math.ceil(Fraction(p, 10) * n) for p in (4, 6, 8)}
                    - set(range(1, max(baseline) + 1))
                )
            return len(baseline) + extra + insights_
        case "process":
            required = sum(step["required"] for step in item["steps"])
            total = len(item["steps"])
            optional = total - required
            return total + (required >= 2) + (optional >= 1 and total >= 2) + insights_
        case "relationship":
            return 1 + len(item["aspects"])
    raise AssertionError(item["type"])


def owner_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every item and meta-insight id -> the item it belongs to."""
    owners = {}
    for item in document["items"]:
        owners[item["id"]] = item
        for insight in item.get("meta_insights", []):
            owners[insight["id"]] = item
    return owners


def compiled(document: dict[str, Any]) -> list[Check]:
    return compile_rubric(validate(document))


# Each invariant is a function; one test runs them all over the same generated documents,
# because drawing a document costs far more than checking it and the suite must stay fast.


def deterministic(document: dict[str, Any], checks: list[Check]) -> None:
    assert compiled(json.loads(json.dumps(document))) == checks
    assert json.dumps(to_json(checks)) == json.dumps(to_json(compiled(document)))


def ids_unique(document: dict[str, Any], checks: list[Check]) -> None:
    assert len({check.id for check in checks}) == len(checks)


def tier_and_source_in_document(document: dict[str, Any], checks: list[Check]) -> None:
    owners = owner_of(document)
    for check in checks:
        assert check.tier in TIERS
        assert check.source in owners
        assert check.id == check.source or check.id.startswith(check.source + ".")


def counts_as_predicted(document: dict[str, Any], checks: list[Check]) -> None:
    per_item = Counter(owner_of(document)[check.source]["id"] for check in checks)
    assert per_item == Counter({item["id"]: expected_count(item) for item in document["items"]})


def secondary_one_tier_below(document: dict[str, Any], checks: list[Check]) -> None:
    owners = owner_of(document)
    insight_tiers = {
        insight["id"]: insight["tier"]
        for item in document["items"]
        for insight in item.get("meta_insights", [])
    }
    for check in checks:
        if check.kind == "meta_insight":
            assert (check.tier, check.secondary) == (insight_tiers[check.source], False)
            continue
        item_tier = owners[check.source]["tier"]
        assert check.tier == (lower(item_tier) if check.secondary else item_tier)


def members_carried(document: dict[str, Any], checks: list[Check]) -> None:
    owners = owner_of(document)
    for check in checks:
        item = owners[check.source]
        if check.kind == "coverage":
            assert check.options == tuple(item["options"])
            assert check.threshold is not None
            assert 1 <= check.threshold <= len(item["options"])
            assert str(check.threshold) in check.text
        if check.kind == "sequence":
            assert check.steps is not None and len(check.steps) >= 2
            assert all(step in check.text for step in check.steps)


def insights_inherit_snippets(document: dict[str, Any], checks: list[Check]) -> None:
    by_id = {check.id: check for check in checks}
    for item in document["items"]:
        for insight in item.get("meta_insights", []):
            own = insight.get("snippets") or item["snippets"]
            assert by_id[insight["id"]].snippets == tuple(own)


def survives_json_round_trip(document: dict[str, Any], checks: list[Check]) -> None:
    meta = validate(document)
    assert compile_rubric(validate(json.loads(meta.model_dump_json()))) == checks


INVARIANTS = [
    deterministic,
    ids_unique,
    tier_and_source_in_document,
    counts_as_predicted,
    secondary_one_tier_below,
    members_carried,
    insights_inherit_snippets,
    survives_json_round_trip,
]


@FAST
@given(documents)
def test_generated_rubrics_compile_by_the_rules(document):
    checks = compiled(document)
    for invariant in INVARIANTS:
        invariant(document, checks)


@FAST
@given(documents_and_edits())
def test_editing_one_item_leaves_every_other_items_checks_unchanged(pair):
    before, after = pair
    edited = {
        item["id"]
        for item, other in zip(before["items"], after["items"], strict=True)
        if item != other
    }

    def others(document: dict[str, Any]) -> list[Check]:
        owners = owner_of(document)
        return [check for check in compiled(document) if owners[check.source]["id"] not in edited]

    assert others(before) == others(after)
