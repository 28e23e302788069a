"""The compiler's rules, one by one (spec sections 1-3), and every validation failure with its
path. Pure Python: no database, no Django."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rubrics.compiler import (
    Check,
    MetaRubric,
    MetaRubricInvalid,
    Problem,
    compile_document,
    compile_rubric,
    default_thresholds,
    lower,
    to_json,
    validate,
)

DISHES = [
    "coq au vin",
    "oeufs en meurette",
    "boeuf à la mode",
    "daube",
    "civet",
    "pochouse",
    "jambon persillé",
]


def document(*items: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "question": "What is this dish and how is it made?",
        "entity": "Beef bourguignon",
        "snippets": [
            {"id": "s1", "url": "https://example.org/a", "title": "A", "text": "evidence a"},
            {"id": "s2", "url": "https://example.org/b", "text": "evidence b"},
        ],
        "items": list(items),
        **fields,
    }


def fact(id: str = "I1", tier: str = "answer_critical", **fields: Any) -> dict[str, Any]:
    return {
        "id": id,
        "type": "fact",
        "tier": tier,
        "statement": "Beef bourguignon is a stew from Burgundy",
        **fields,
    }


def strict(
    id: str = "I2", tier: str = "answer_critical", items: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    return {
        "id": id,
        "type": "strict_list",
        "tier": tier,
        "topic": "core ingredients of beef bourguignon",
        "items": items if items is not None else ["beef", "red wine", "onions"],
        **fields,
    }


def flexible(
    id: str = "I3",
    tier: str = "answer_critical",
    options: list[str] | None = None,
    baseline: list[int] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": id,
        "type": "flexible_list",
        "tier": tier,
        "topic": "other dishes braised in Burgundy wine",
        "options": options if options is not None else DISHES,
        "baseline": baseline if baseline is not None else [2],
        **fields,
    }


def process(
    id: str = "I4",
    tier: str = "valuable",
    steps: list[tuple[str, bool]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    steps = steps if steps is not None else [("Marinate the beef", True), ("Brown it", True)]
    return {
        "id": id,
        "type": "process",
        "tier": tier,
        "topic": "preparation of the dish",
        "steps": [{"text": text, "required": required} for text, required in steps],
        **fields,
    }


def relationship(id: str = "I5", tier: str = "context", **fields: Any) -> dict[str, Any]:
    return {
        "id": id,
        "type": "relationship",
        "tier": tier,
        "entity": "Coq au vin",
        "relation": "the same braise made with chicken",
        "aspects": ["it uses chicken instead of beef", "both use red Burgundy wine"],
        **fields,
    }


def insight(id: str = "M1", tier: str = "valuable", **fields: Any) -> dict[str, Any]:
    return {"id": id, "statement": "It always uses a red meat.", "tier": tier, **fields}


def checks_of(*items: dict[str, Any], **fields: Any) -> list[Check]:
    return compile_document(document(*items, **fields))


def problems_of(doc: Any) -> list[str]:
    with pytest.raises(MetaRubricInvalid) as info:
        validate(doc)
    return [str(problem) for problem in info.value.problems]


def summary(checks: list[Check]) -> list[tuple[str, str, str, bool]]:
    return [(check.id, check.kind, check.tier, check.secondary) for check in checks]


# --- tiers


def test_lower_goes_one_tier_down_and_context_stays():
    assert lower("answer_critical") == "valuable"
    assert lower("valuable") == "context"
    assert lower("context") == "context"


# --- flexible lists


def test_worked_example_seven_dishes_baseline_two():
    """The method text's example: one answer_critical "at least 2 of the seven" check and seven
    valuable per-dish checks."""
    checks = checks_of(flexible(tier="answer_critical", options=DISHES, baseline=[2]))
    assert summary(checks) == [("I3.base1", "coverage", "answer_critical", False)] + [
        (f"I3.opt{k}", "option", "valuable", True) for k in range(1, 8)
    ]
    base = checks[0]
    assert base.threshold == 2 and base.options == tuple(DISHES)
    assert base.rule == "flexible_list.baseline"
    assert base.text == (
        "The response mentions at least 2 of the following other dishes braised in Burgundy "
        "wine: coq au vin, oeufs en meurette, boeuf à la mode, daube, civet, pochouse, "
        "jambon persillé."
    )
    assert [check.text for check in checks[1:3]] == [
        'The response mentions "coq au vin" as one of the other dishes braised in Burgundy wine.',
        'The response mentions "oeufs en meurette" as one of the other dishes braised in '
        "Burgundy wine.",
    ]
    assert {check.rule for check in checks[1:]} == {"flexible_list.option"}
    assert all(check.source == "I3" for check in checks)


def test_short_valuable_list_credits_each_option_at_context():
    checks = checks_of(flexible(tier="valuable", options=["a", "b", "c"], baseline=[1]))
    assert summary(checks) == [
        ("I3.base1", "coverage", "valuable", False),
        ("I3.opt1", "option", "context", True),
        ("I3.opt2", "option", "context", True),
        ("I3.opt3", "option", "context", True),
    ]


def test_long_list_gets_default_higher_thresholds_instead_of_option_checks():
    options = [f"dish {k}" for k in range(1, 11)]
    checks = checks_of(flexible(options=options, baseline=[2]))
    # n = 10: ceil(4), ceil(6), ceil(8), all above the baseline's 2
    assert summary(checks) == [
        ("I3.base1", "coverage", "answer_critical", False),
        ("I3.cov1", "coverage", "valuable", True),
        ("I3.cov2", "coverage", "valuable", True),
        ("I3.cov3", "coverage", "valuable", True),
    ]
    assert [check.threshold for check in checks] == [2, 4, 6, 8]
    assert all(check.options == tuple(options) for check in checks)
    assert [check.rule for check in checks[1:]] == ["flexible_list.higher_threshold"] * 3
    assert checks[3].text.startswith("The response mentions at least 8 of the following")
    assert all(option in checks[3].text for option in options)


def test_seven_options_is_short_and_eight_is_long():
    seven = checks_of(flexible(options=[f"o{k}" for k in range(7)], baseline=[1]))
    assert [check.kind for check in seven] == ["coverage"] + ["option"] * 7
    eight = checks_of(flexible(options=[f"o{k}" for k in range(8)], baseline=[1]))
    # n = 8: ceil(3.2) = 4, ceil(4.8) = 5, ceil(6.4) = 7
    assert [check.threshold for check in eight] == [1, 4, 5, 7]
    assert [check.kind for check in eight] == ["coverage"] * 4


def test_context_tier_short_list_is_treated_like_a_long_one():
    checks = checks_of(flexible(tier="context", options=["a", "b", "c", "d", "e"], baseline=[1]))
    # n = 5: ceil(2), ceil(3), ceil(4); the secondary checks stay at context, there is no lower
    assert summary(checks) == [
        ("I3.base1", "coverage", "context", False),
        ("I3.cov1", "coverage", "context", True),
        ("I3.cov2", "coverage", "context", True),
        ("I3.cov3", "coverage", "context", True),
    ]
    assert [check.threshold for check in checks] == [1, 2, 3, 4]


def test_two_baselines_give_two_list_tier_checks_and_thresholds_above_the_higher():
    options = [f"dish {k}" for k in range(1, 11)]
    checks = checks_of(flexible(tier="valuable", options=options, baseline=[2, 4]))
    assert summary(checks) == [
        ("I3.base1", "coverage", "valuable", False),
        ("I3.base2", "coverage", "valuable", False),
        ("I3.cov1", "coverage", "context", True),
        ("I3.cov2", "coverage", "context", True),
    ]
    assert [check.threshold for check in checks] == [2, 4, 6, 8]


def test_two_baselines_on_a_short_list_still_credit_each_option():
    checks = checks_of(flexible(options=DISHES, baseline=[2, 4]))
    assert [check.id for check in checks[:3]] == ["I3.base1", "I3.base2", "I3.opt1"]
    assert len(checks) == 2 + 7


def test_explicit_extra_thresholds_replace_the_defaults():
    options = [f"dish {k}" for k in range(1, 13)]
    checks = checks_of(flexible(options=options, baseline=[3], extra_thresholds=[5, 9, 12]))
    assert [(check.id, check.threshold) for check in checks] == [
        ("I3.base1", 3),
        ("I3.cov1", 5),
        ("I3.cov2", 9),
        ("I3.cov3", 12),
    ]
    assert checks[3].text.startswith("The response mentions all 12 of the following")


def test_explicit_empty_extra_thresholds_mean_none():
    checks = checks_of(flexible(options=[f"o{k}" for k in range(10)], extra_thresholds=[]))
    assert [check.id for check in checks] == ["I3.base1"]


def test_no_default_threshold_above_the_baseline_leaves_only_the_baseline():
    # n = 10: 4, 6, 8 are all <= 8
    checks = checks_of(flexible(options=[f"o{k}" for k in range(10)], baseline=[3, 8]))
    assert [check.id for check in checks] == ["I3.base1", "I3.base2"]


def test_extra_thresholds_do_not_apply_to_short_lists_credited_per_option():
    checks = checks_of(flexible(options=DISHES, baseline=[2], extra_thresholds=[4]))
    assert [check.kind for check in checks] == ["coverage"] + ["option"] * 7


@pytest.mark.parametrize(
    ("n", "baseline", "expected"),
    [
        (10, [2], [4, 6, 8]),
        (10, [4], [6, 8]),
        (15, [1], [6, 9, 12]),  # 0.4 * 15 is 6.000000000000001 in floating point: still 6
        (3, [1], [2, 3]),  # ceil(1.2) = ceil(1.8) = 2: distinct values only
        (8, [7], []),
        (2, [1], [2]),
    ],
)
def test_default_thresholds(n, baseline, expected):
    assert default_thresholds(n, baseline) == expected


def test_options_holding_commas_are_separated_by_semicolons():
    checks = checks_of(flexible(tier="context", options=["salt, coarse", "pepper"], baseline=[1]))
    assert checks[0].text.endswith("braised in Burgundy wine: salt, coarse; pepper.")


# --- facts, strict lists, relationships


def test_fact_is_one_check_at_its_tier_with_its_snippets():
    (check,) = checks_of(fact(tier="valuable", snippets=["s1", "s2"]))
    assert check == Check(
        id="I1",
        kind="fact",
        tier="valuable",
        secondary=False,
        source="I1",
        rule="fact",
        text="The response conveys this fact: Beef bourguignon is a stew from Burgundy.",
        snippets=("s1", "s2"),
    )


def test_strict_list_is_one_check_per_member_at_the_list_tier():
    checks = checks_of(strict(tier="valuable", snippets=["s2"]))
    assert summary(checks) == [
        ("I2.item1", "list_item", "valuable", False),
        ("I2.item2", "list_item", "valuable", False),
        ("I2.item3", "list_item", "valuable", False),
    ]
    assert checks[1].text == (
        'The response mentions "red wine" as one of the core ingredients of beef bourguignon.'
    )
    assert {check.snippets for check in checks} == {("s2",)}
    assert {check.rule for check in checks} == {"strict_list.item"}


def test_a_topic_written_with_the_is_not_doubled():
    checks = checks_of(strict(topic="The core ingredients", items=["beef"]))
    assert checks[0].text == 'The response mentions "beef" as one of the core ingredients.'


def test_relationship_names_the_entity_then_each_aspect_at_the_item_tier():
    checks = checks_of(relationship(tier="valuable"))
    assert summary(checks) == [
        ("I5.entity", "relation_entity", "valuable", False),
        ("I5.aspect1", "relation_aspect", "valuable", False),
        ("I5.aspect2", "relation_aspect", "valuable", False),
    ]
    assert checks[0].text == (
        "The response identifies Coq au vin as related to Beef "
        "bourguignon: the same braise made with chicken."
    )
    assert checks[2].text == (
        "On how Beef bourguignon relates to Coq au vin, the response "
        "conveys: both use red Burgundy wine."
    )
    assert [check.rule for check in checks] == [
        "relationship.entity",
        "relationship.aspect",
        "relationship.aspect",
    ]


# --- processes


def test_process_with_required_steps_only():
    checks = checks_of(
        process(
            tier="answer_critical", steps=[("Marinate", True), ("Brown", True), ("Simmer", True)]
        )
    )
    assert summary(checks) == [
        ("I4.step1", "step", "answer_critical", False),
        ("I4.step2", "step", "answer_critical", False),
        ("I4.step3", "step", "answer_critical", False),
        ("I4.seq_required", "sequence", "answer_critical", False),
    ]
    assert checks[3].steps == ("Marinate", "Brown", "Simmer")
    assert checks[3].rule == "process.sequence_required"
    assert checks[3].text == (
        "In describing the preparation of the dish, the response gives these steps in this "
        "order (other steps may come between them): (1) Marinate; (2) Brown; (3) Simmer."
    )


def test_process_with_optional_steps():
    checks = checks_of(
        process(
            tier="answer_critical",
            steps=[
                ("Marinate", True),
                ("Flambé with cognac", False),
                ("Brown", True),
                ("Simmer", True),
            ],
        )
    )
    assert summary(checks) == [
        ("I4.step1", "step", "answer_critical", False),
        ("I4.step2", "step", "valuable", True),
        ("I4.step3", "step", "answer_critical", False),
        ("I4.step4", "step", "answer_critical", False),
        ("I4.seq_required", "sequence", "answer_critical", False),
        ("I4.seq_all", "sequence", "valuable", True),
    ]
    assert [check.rule for check in checks[:2]] == [
        "process.step_required",
        "process.step_optional",
    ]
    assert checks[4].steps == ("Marinate", "Brown", "Simmer")
    assert checks[5].steps == ("Marinate", "Flambé with cognac", "Brown", "Simmer")
    assert checks[5].rule == "process.sequence_all"
    assert checks[1].text == (
        "In describing the preparation of the dish, the response mentions this step: "
        "Flambé with cognac."
    )


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("Simmer", True)], [("I4.step1", "valuable", False)]),
        ([("Garnish", False)], [("I4.step1", "context", True)]),
        (
            [("Brown", True), ("Garnish", False)],
            [
                ("I4.step1", "valuable", False),
                ("I4.step2", "context", True),
                ("I4.seq_all", "context", True),
            ],
        ),
        (
            [("Garnish", False), ("Serve", False)],
            [
                ("I4.step1", "context", True),
                ("I4.step2", "context", True),
                ("I4.seq_all", "context", True),
            ],
        ),
    ],
    ids=["one-required", "one-optional", "required-and-optional", "optional-only"],
)
def test_small_processes_get_a_sequence_check_only_where_there_is_an_order(steps, expected):
    checks = checks_of(process(tier="valuable", steps=steps))
    assert [(check.id, check.tier, check.secondary) for check in checks] == expected


def test_context_process_keeps_context_for_its_secondary_checks():
    checks = checks_of(process(tier="context", steps=[("Brown", True), ("Garnish", False)]))
    assert {check.tier for check in checks} == {"context"}
    assert [check.secondary for check in checks] == [False, True, True]


# --- meta-insights


def test_meta_insight_is_one_check_at_its_own_tier_after_its_parent():
    checks = checks_of(
        strict(
            tier="valuable",
            snippets=["s1"],
            meta_insights=[
                insight("M1", tier="answer_critical"),
                insight("M2", tier="context", snippets=["s2"]),
            ],
        ),
        fact("I9"),
    )
    assert [check.id for check in checks] == ["I2.item1", "I2.item2", "I2.item3", "M1", "M2", "I9"]
    m1, m2 = checks[3], checks[4]
    assert (m1.kind, m1.tier, m1.secondary, m1.source, m1.rule) == (
        "meta_insight",
        "answer_critical",
        False,
        "M1",
        "meta_insight",
    )
    assert m1.snippets == ("s1",)  # inherited from the list
    assert m2.snippets == ("s2",)  # its own
    assert m1.text == (
        "The response conveys this overall insight about the core ingredients "
        "of beef bourguignon: It always uses a red meat."
    )


def test_meta_insights_on_flexible_lists_and_processes():
    checks = checks_of(
        flexible(meta_insights=[insight("M1")]),
        process(meta_insights=[insight("M2", tier="context")]),
    )
    assert [(check.id, check.tier) for check in checks if check.kind == "meta_insight"] == [
        ("M1", "valuable"),
        ("M2", "context"),
    ]
    assert checks[-1].id == "M2" and checks[8].id == "M1"


# --- output


def test_to_json_gives_the_fields_the_spec_names_and_by_kind_extras():
    checks = checks_of(fact(), flexible(), process(steps=[("a", True), ("b", True)]))
    data = to_json(checks)
    assert list(data) == ["checks"]
    by_id = {check["id"]: check for check in data["checks"]}
    common = ["id", "kind", "tier", "secondary", "source", "rule", "text", "snippets"]
    assert list(by_id["I1"]) == common
    assert list(by_id["I3.base1"]) == common + ["threshold", "options"]
    assert by_id["I3.base1"]["threshold"] == 2 and by_id["I3.base1"]["options"] == DISHES
    assert list(by_id["I3.opt1"]) == common
    assert list(by_id["I4.seq_required"]) == common + ["steps"]
    assert by_id["I4.seq_required"]["steps"] == ["a", "b"]
    assert json.loads(json.dumps(data)) == data


def test_compiling_twice_gives_identical_output():
    doc = document(fact(), strict(), flexible(), process(), relationship())
    assert compile_document(doc) == compile_document(json.loads(json.dumps(doc)))


def test_editing_one_item_leaves_the_other_items_check_ids_alone():
    before = checks_of(strict(), flexible(), process())
    after = checks_of(strict(items=["beef"]), flexible(options=DISHES + ["x", "y"]), process())
    assert [c.id for c in before if c.source == "I4"] == [c.id for c in after if c.source == "I4"]
    assert [c.id for c in after if c.source == "I2"] == ["I2.item1"]


def test_the_json_schema_is_closed_and_discriminated_by_type():
    schema = MetaRubric.model_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"schema_version", "question", "entity", "items"}
    union = schema["properties"]["items"]["items"]
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == {
        "fact",
        "strict_list",
        "flexible_list",
        "process",
        "relationship",
    }
    assert all(model["additionalProperties"] is False for model in schema["$defs"].values())


def test_validate_strips_spaces_and_fills_defaults():
    meta = validate(document({**fact(), "statement": "  Beef stew.  "}))
    assert meta.items[0].statement == "Beef stew." and meta.items[0].snippets == []
    assert compile_rubric(meta)[0].text == "The response conveys this fact: Beef stew."


def test_snippets_are_optional_at_the_top_level():
    doc = document(fact())
    del doc["snippets"]
    assert validate(doc).snippets == []


# --- validation: every problem, with its path


def test_not_an_object():
    assert problems_of([]) == ["document: expected an object, got a list"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (2, "schema_version: unsupported schema_version 2; this compiler reads version 1"),
        ("1", "schema_version: expected an integer, got a string"),
        (True, "schema_version: expected an integer, got a boolean"),
    ],
)
def test_schema_version_must_be_the_integer_1(value, message):
    assert problems_of(document(fact(), schema_version=value)) == [message]


def test_missing_top_level_fields():
    assert problems_of({"items": [fact()]}) == [
        "schema_version: required field is missing",
        "question: required field is missing",
        "entity: required field is missing",
    ]


def test_empty_items_and_blank_question():
    assert problems_of(document(question="   ")) == [
        "question: must not be empty",
        "items: needs at least 1 item, has 0",
    ]


def test_unknown_and_missing_type():
    item = fact()
    del item["type"]
    assert problems_of(document(fact(), {**fact("I2"), "type": "list"}, item)) == [
        'items[1].type: unknown type "list"; expected one of fact, strict_list, '
        "flexible_list, process, relationship",
        "items[2].type: required field is missing (one of fact, strict_list, flexible_list, "
        "process, relationship)",
        'items[2].id: duplicate id "I1" (also at items[0].id)',
    ]


def test_unknown_tier_on_an_item_and_on_a_meta_insight():
    doc = document(strict(tier="critical", meta_insights=[insight(tier="high")]))
    assert problems_of(doc) == [
        'items[0].tier: unknown tier "critical"; expected one of answer_critical, valuable, '
        "context",
        'items[0].meta_insights[0].tier: unknown tier "high"; expected one of answer_critical, '
        "valuable, context",
    ]


def test_missing_and_empty_required_fields():
    no_statement = fact()
    del no_statement["statement"]
    doc = document(
        no_statement,
        strict(topic=" ", items=[]),
        flexible(options=["only one"], baseline=[]),
        process(steps=[]),
        relationship(aspects=[""]),
        {**process("I6"), "steps": [{"text": "Brown"}]},
    )
    assert problems_of(doc) == [
        "items[0].statement: required field is missing",
        "items[1].topic: must not be empty",
        "items[1].items: needs at least 1 item, has 0",
        "items[2].options: needs at least 2 options, has 1",
        "items[2].baseline: needs at least 1 value, has 0",
        "items[3].steps: needs at least 1 step, has 0",
        "items[4].aspects[0]: must not be empty",
        "items[5].steps[0].required: required field is missing",
    ]


def test_wrong_json_types():
    doc = document(
        fact(statement=7),
        flexible(baseline="2"),
        flexible("I4", baseline=[2.0], extra_thresholds=["5"]),
        process("I5", steps=[("Brown", True)]) | {"steps": [{"text": "Brown", "required": 1}]},
        strict("I6", items="beef"),
        relationship("I7", snippets="s1"),
        [1, 2],
    )
    assert problems_of(doc) == [
        "items[0].statement: expected a string, got an integer",
        "items[1].baseline: expected a list, got a string",
        "items[2].baseline[0]: expected an integer, got a number",
        "items[2].extra_thresholds[0]: expected an integer, got a string",
        "items[3].steps[0].required: expected a boolean (true or false), got an integer",
        "items[4].items: expected a list, got a string",
        "items[5].snippets: expected a list, got a string",
        "items[6]: expected an object, got a list",
    ]


def test_unknown_fields_name_the_allowed_ones():
    doc = document(
        {**fact(), "options": ["a"]},
        process("I2") | {"steps": [{"text": "a", "required": True, "optional": 1}]},
        extra=1,
    )
    assert problems_of(doc) == [
        "extra: unknown field; the document has schema_version, question, entity, snippets, items",
        "items[0].options: unknown field; a fact item has id, type, tier, snippets, note, "
        "statement",
        "items[1].steps[0].optional: unknown field; a step has text, required",
    ]


def test_misspelt_extra_thresholds_is_not_silently_ignored():
    assert problems_of(document(flexible(extra_threshold=[5])))[0].startswith(
        "items[0].extra_threshold: unknown field; a flexible_list item has id, type, tier,"
    )


def test_ids_must_be_unique_across_items_and_meta_insights():
    doc = document(
        strict("I1", meta_insights=[insight("M1"), insight("M1")]),
        fact("I1"),
        process("I3", meta_insights=[insight("I1")]),
    )
    assert problems_of(doc) == [
        'items[0].meta_insights[1].id: duplicate id "M1" (also at items[0].meta_insights[0].id)',
        'items[1].id: duplicate id "I1" (also at items[0].id)',
        'items[2].meta_insights[0].id: duplicate id "I1" (also at items[0].id)',
    ]


def test_ids_differing_only_in_surrounding_spaces_are_the_same_id():
    assert problems_of(document(fact("I1"), fact(" I1 "))) == [
        'items[1].id: duplicate id "I1" (also at items[0].id)'
    ]


def test_ids_may_not_hold_dots_or_spaces():
    assert problems_of(document(fact("I.1"), fact("I 2"))) == [
        "items[0].id: \"I.1\" is not a valid id: use only letters, digits, '-' and '_'",
        "items[1].id: \"I 2\" is not a valid id: use only letters, digits, '-' and '_'",
    ]


def test_snippet_ids_must_be_defined_and_unique():
    doc = document(
        fact(snippets=["s1", "s9"]),
        strict(meta_insights=[insight(snippets=["nope"])]),
        snippets=[
            {"id": "s1", "url": "https://a.example/u", "text": "t"},
            {"id": "s1", "url": "https://a.example/v", "text": "w"},
        ],
    )
    assert problems_of(doc) == [
        'snippets[1].id: duplicate snippet id "s1" (also at snippets[0].id)',
        'items[0].snippets[1]: unknown snippet "s9": no top-level snippet has this id',
        'items[1].meta_insights[0].snippets[0]: unknown snippet "nope": no top-level snippet '
        "has this id",
    ]


def test_a_snippet_needs_its_fields():
    doc = document(fact(), snippets=[{"id": "s1", "text": ""}])
    assert problems_of(doc) == [
        "snippets[0].url: required field is missing",
        "snippets[0].text: must not be empty",
    ]


def test_baseline_rules():
    doc = document(
        flexible("A", baseline=[9]),  # the spec's own example
        flexible("B", baseline=[1, 2, 3]),
        flexible("C", baseline=[0]),
        flexible("D", baseline=[3, 2]),
        flexible("E", baseline=[2, 2]),
    )
    assert problems_of(doc) == [
        "items[0].baseline[0]: 9 exceeds the 7 options",
        "items[1].baseline: needs at most 2 values, has 3",
        "items[2].baseline[0]: must be at least 1, not 0",
        "items[3].baseline[1]: 2 is not greater than the value before it, 3 "
        "(the values must increase)",
        "items[4].baseline[1]: 2 is not greater than the value before it, 2 "
        "(the values must increase)",
    ]


def test_extra_threshold_rules():
    ten = [f"o{k}" for k in range(10)]
    doc = document(
        flexible("A", options=ten, baseline=[3], extra_thresholds=[6, 5]),
        flexible("B", options=ten, baseline=[2, 4], extra_thresholds=[4, 8]),
        flexible("C", options=ten, baseline=[2], extra_thresholds=[5, 11]),
        flexible("D", options=ten, baseline=[2], extra_thresholds=[0]),
    )
    assert problems_of(doc) == [
        "items[0].extra_thresholds[1]: 5 is not greater than the value before it, 6 "
        "(the values must increase)",
        "items[1].extra_thresholds[0]: 4 is not above the highest baseline value, 4",
        "items[2].extra_thresholds[1]: 11 exceeds the 10 options",
        "items[3].extra_thresholds[0]: must be at least 1, not 0",
        "items[3].extra_thresholds[0]: 0 is not above the highest baseline value, 2",
    ]


def test_duplicate_members_compared_ignoring_case_and_spaces():
    doc = document(
        strict(items=["beef", "Red wine", "red  WINE", "redwine"]),
        flexible(options=["daube", "civet", " Daube "]),
        process(steps=[("Brown the beef", True), ("brown the beef", False)]),
        relationship(aspects=["same wine", "Same Wine"]),
    )
    assert problems_of(doc) == [
        'items[0].items[2]: "red  WINE" repeats items[0].items[1] '
        "(compared ignoring case and spaces)",
        'items[0].items[3]: "redwine" repeats items[0].items[1] '
        "(compared ignoring case and spaces)",
        'items[1].options[2]: "Daube" repeats items[1].options[0] '
        "(compared ignoring case and spaces)",
        'items[2].steps[1].text: "brown the beef" repeats items[2].steps[0].text '
        "(compared ignoring case and spaces)",
        'items[3].aspects[1]: "Same Wine" repeats items[3].aspects[0] '
        "(compared ignoring case and spaces)",
    ]


def test_every_problem_is_reported_at_once_grouped_by_item():
    doc = document(
        fact(tier="urgent", snippets=["s7"]),
        flexible("I1", tier="critical", baseline=[9], options=DISHES + ["Daube"]),
        question="",
    )
    assert problems_of(doc) == [
        "question: must not be empty",
        'items[0].tier: unknown tier "urgent"; expected one of answer_critical, valuable, context',
        'items[0].snippets[0]: unknown snippet "s7": no top-level snippet has this id',
        'items[1].tier: unknown tier "critical"; expected one of answer_critical, valuable, '
        "context",
        'items[1].id: duplicate id "I1" (also at items[0].id)',
        'items[1].options[7]: "Daube" repeats items[1].options[3] '
        "(compared ignoring case and spaces)",
        "items[1].baseline[0]: 9 exceeds the 8 options",
    ]


def test_the_exception_carries_problems_and_reads_as_lines():
    with pytest.raises(MetaRubricInvalid) as info:
        validate(document(fact(tier="x"), fact()))
    assert info.value.problems[0] == Problem(
        "items[0].tier", 'unknown tier "x"; expected one of answer_critical, valuable, context'
    )
    assert str(info.value) == "\n".join(map(str, info.value.problems))
    assert len(info.value.problems) == 2


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.domain)",
        "JaVaScRiPt:alert(1)",
        "  javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:x",
        "//evil.example/x",
        "ftp://files.example/a",
        "https:alert(1)",
        "http://",
        "en.wikipedia.org",
        "http://[::1",
        "file:///etc/passwd",
    ],
)
def test_a_snippet_url_must_be_http_or_https(url):
    doc = document(fact(snippets=["s1"]), snippets=[{"id": "s1", "url": url, "text": "t"}])
    (problem,) = problems_of(doc)
    assert problem.startswith("snippets[0].url: must be an http or https URL, not ")


@pytest.mark.parametrize(
    "url",
    [
        "https://en.wikipedia.org/wiki/Cappuccino",
        "HTTP://EXAMPLE.ORG/a?b=c#d",
        "http://127.0.0.1:8000/x",
    ],
)
def test_http_and_https_snippet_urls_pass(url):
    doc = document(fact(snippets=["s1"]), snippets=[{"id": "s1", "url": url, "text": "t"}])
    assert validate(doc).snippets[0].url == url
