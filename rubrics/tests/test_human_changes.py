"""The human changes of a round and the checks of a rebuild's answer to them
(rubrics/human_changes.py). Pure Python: no database."""

from __future__ import annotations

import copy

from rubrics import compiler
from rubrics.human_changes import (
    Answer,
    CheckRow,
    HumanChange,
    change_problems,
    derive_changes,
    outcomes,
)

PARENT = [
    CheckRow(
        "I1",
        "The response conveys this fact: It is braised in red wine.",
        "answer_critical",
        source="I1",
    ),
    CheckRow(
        "I2.item1",
        'The response mentions "lardons" as one of the garnish.',
        "valuable",
        source="I2",
    ),
    CheckRow(
        "I2.item2",
        'The response mentions "mushrooms" as one of the garnish.',
        "valuable",
        source="I2",
    ),
    CheckRow(
        "I2.item3",
        'The response mentions "pearl onions" as one of the garnish.',
        "valuable",
        source="I2",
    ),
]


def human(**changes: dict) -> list[CheckRow]:
    rows = []
    for row in PARENT:
        fields = changes.get(row.check_id.replace(".", "_"), {})
        rows.append(CheckRow(**{**row.__dict__, **fields}))
    return rows


def test_no_change_no_changes_and_moves_are_not_changes():
    assert derive_changes(PARENT, PARENT) == []
    assert derive_changes(PARENT, list(reversed(PARENT))) == []


def test_each_kind_of_change_in_checklist_order_with_stable_ids():
    rows = human(
        I1={"text": "The beef is braised in Burgundy wine."},
        I2_item1={"tier": "context"},
        I2_item2={"text": "Button mushrooms.", "tier": "answer_critical"},
        I2_item3={"deleted": True, "reason": "pearl onions are optional"},
    )
    rows.insert(1, CheckRow("H1", "الطبق من بورغونيا 它来自勃艮第", "valuable", added=True))
    rows.append(CheckRow("H2", "Added then deleted.", "context", added=True, deleted=True))
    changes = derive_changes(PARENT, rows)
    assert [(c.id, c.op, c.check_id) for c in changes] == [
        ("h1", "edit", "I1"),
        ("h2", "add", "H1"),
        ("h3", "retier", "I2.item1"),
        ("h4", "edit", "I2.item2"),  # edited and re-tiered: two changes
        ("h5", "retier", "I2.item2"),
        ("h6", "delete", "I2.item3"),
    ]
    edit, add, retier, _, _, delete = changes
    assert (edit.before, edit.text, edit.tier) == (PARENT[0].text, rows[0].text, "answer_critical")
    assert (add.text, add.tier, add.source) == ("الطبق من بورغونيا 它来自勃艮第", "valuable", "")
    assert (retier.tier_before, retier.tier) == ("valuable", "context")
    # The deletion keeps the parent's text (what would compile again) and the reason.
    assert (delete.text, delete.reason) == (PARENT[3].text, "pearl onions are optional")
    assert add.describe() == "addition of H1 at valuable"
    assert retier.describe() == "re-tier of I2.item1 from valuable to context"
    assert add.for_prompt() == {
        "id": "h2",
        "change": "add",
        "check": "H1",
        "text": "الطبق من بورغونيا 它来自勃艮第",
        "tier": "valuable",
    }


def test_a_text_changed_back_is_no_change():
    rows = human(I1={"text": PARENT[0].text, "tier": "answer_critical"})
    assert derive_changes(PARENT, rows) == []


# ---------------------------------------------------------------------------------------------
# The checks of an answer.

INPUT = {
    "schema_version": 1,
    "question": "What is this dish?",
    "entity": "Beef bourguignon",
    "snippets": [],
    "items": [
        {
            "id": "I1",
            "type": "fact",
            "tier": "answer_critical",
            "statement": "It is braised in red wine.",
        },
        {
            "id": "I2",
            "type": "strict_list",
            "tier": "valuable",
            "topic": "garnish",
            "items": ["lardons", "mushrooms", "pearl onions"],
        },
    ],
}


def full(document: dict) -> dict:
    return compiler.validate(document).model_dump(mode="json")


def compiled(document: dict) -> list[compiler.Check]:
    return compiler.compile_document(document)


def problems(changes: list[HumanChange], answers: list[Answer], document: dict) -> list[str]:
    document = full(document)
    return change_problems(
        changes, answers, input_meta=full(INPUT), document=document, compiled=compiled(document)
    )


# The input's checks as the parent version holds them, then the human round's: I1 edited, H1
# added, I2.item1 re-tiered, I2.item3 deleted.
compiled_rows = [CheckRow(c.id, c.text, c.tier, source=c.source) for c in compiled(INPUT)]
CHANGES = derive_changes(
    compiled_rows,
    [
        CheckRow("I1", "The beef is braised in Burgundy wine.", "answer_critical", source="I1"),
        CheckRow("H1", "It is a dish from Burgundy.", "valuable", added=True),
        CheckRow(compiled_rows[1].check_id, compiled_rows[1].text, "context", source="I2"),
        compiled_rows[2],
        CheckRow(
            compiled_rows[3].check_id,
            compiled_rows[3].text,
            "valuable",
            deleted=True,
            reason="optional",
            source="I2",
        ),
    ],
)


def carried_document() -> dict:
    """A rebuild that carries all four changes."""
    document = copy.deepcopy(INPUT)
    document["items"] = [
        {
            "id": "I1",
            "type": "fact",
            "tier": "answer_critical",
            "statement": "The beef is braised in Burgundy wine.",
        },
        {
            "id": "I2",
            "type": "strict_list",
            "tier": "valuable",
            "topic": "garnish",
            "items": ["mushrooms"],
        },
        {
            "id": "I3",
            "type": "fact",
            "tier": "valuable",
            "statement": "It is a dish from Burgundy.",
        },
        {"id": "I4", "type": "fact", "tier": "context", "statement": "It has lardons."},
    ]
    return document


CARRIED = [
    Answer("h1", "carried", "I1"),
    Answer("h2", "carried", "I3"),
    Answer("h3", "carried", "I4"),
    Answer("h4", "carried", "I2"),
]


def test_the_changes_under_test():
    assert [(c.id, c.op, c.check_id) for c in CHANGES] == [
        ("h1", "edit", "I1"),
        ("h2", "add", "H1"),
        ("h3", "retier", "I2.item1"),
        ("h4", "delete", "I2.item3"),
    ]


def test_a_rebuild_that_carries_every_change_passes_and_says_where():
    document = carried_document()
    assert problems(CHANGES, CARRIED, document) == []
    kept = outcomes(CHANGES, CARRIED, compiled(document))
    assert [(k["id"], k["outcome"], k["item"], k["checks"]) for k in kept] == [
        ("h1", "carried", "I1", ["I1"]),
        ("h2", "carried", "I3", ["I3"]),
        ("h3", "carried", "I4", ["I4"]),
        ("h4", "carried", "I2", []),
    ]
    assert kept[3]["reason"] == "optional"  # the reviser's reason stays with the change


def test_every_change_answered_once_and_a_drop_needs_its_reason():
    found = problems(
        CHANGES,
        [CARRIED[0], CARRIED[0], Answer("h9", "carried", "I1"), Answer("h3", "dropped", "", " ")],
        carried_document(),
    )
    assert found == [
        "human_changes[1].id: h1 is answered already; answer each change once",
        "human_changes[2].id: 'h9' is not a change of the human round (its changes: h1, h2, h3, "
        "h4)",
        "human_changes[3].reason: h3 (re-tier of I2.item1 from valuable to context) is dropped "
        "without a reason; give it, or carry it",
        'human_changes: no answer for h2 (addition of H1 at valuable: "It is a dish from '
        'Burgundy."); h4 (deletion of I2.item3: "The response mentions "pearl onions" as one of '
        'the garnish."); carry each into the items and name the item, or drop it with a reason',
    ]
    dropped = [Answer(c.id, "dropped", "", "the evidence says otherwise") for c in CHANGES]
    assert problems(CHANGES, dropped, INPUT) == []


def test_a_reverted_edit_is_named_with_what_was_lost():
    document = carried_document()
    document["items"][0]["statement"] = "It is braised in red wine."  # the text before the edit
    assert problems(CHANGES, CARRIED, document) == [
        "human_changes[0]: h1 (edit of I1) is reverted: the rebuild compiles I1 to its text "
        "before the reviser's edit; carry the edit or drop it with a reason"
    ]


def test_a_reverted_retier_and_a_deleted_check_compiled_again():
    document = carried_document()
    document["items"][1]["items"] = ["lardons", "mushrooms", "pearl onions"]
    found = problems(CHANGES, CARRIED, document)
    assert found == [
        "human_changes[2]: h3 (re-tier of I2.item1 from valuable to context) is reverted: the "
        "rebuild compiles I2.item1 at valuable again; carry the re-tier or drop it with a reason",
        "human_changes[3]: h4 (deletion of I2.item3) is not carried: the rebuild compiles "
        "I2.item3 again with the deleted text; remove what it came from or drop the change with "
        "a reason",
    ]


def test_a_carried_change_needs_an_item_at_the_humans_tier_and_an_addition_a_changed_one():
    document = carried_document()
    answers = [
        Answer("h1", "carried", ""),
        Answer("h2", "carried", "I2"),  # changed, and valuable: it may carry the addition
        Answer("h3", "carried", "I1"),  # I1 is answer-critical, the re-tier says context
        Answer("h4", "carried", "I9"),
    ]
    assert problems(CHANGES, answers, document) == [
        "human_changes[0].item: h1 (edit of I1) is carried but names no item; name the item or "
        "meta-insight of the rebuild that carries it",
        "human_changes[2]: h3 (re-tier of I2.item1 from valuable to context) is carried by I1, "
        "which compiles to no check at context; carry it at that tier or drop it with a reason",
        "human_changes[3].item: 'I9' is no item or meta-insight of the rebuild (h4 (deletion of "
        "I2.item3))",
    ]
    # An addition "carried" by an input item left as it was is not carried.
    unchanged = copy.deepcopy(INPUT)
    unchanged["items"].append(carried_document()["items"][3])
    found = problems(CHANGES[1:2], [Answer("h2", "carried", "I1")], unchanged)
    assert found == [
        "human_changes[0]: h2 (addition of H1 at valuable) is carried by I1, which compiles to no "
        "check at valuable; carry it at that tier or drop it with a reason",
        "human_changes[0]: h2 (addition of H1 at valuable) is carried by I1, which is the input's "
        "I1 unchanged; put the added check into an item (changed or new) or drop it with a reason",
    ]


def test_a_document_that_does_not_compile_gets_only_the_answers_checked():
    found = change_problems(
        CHANGES, CARRIED[:3], input_meta=INPUT, document=carried_document(), compiled=None
    )
    assert len(found) == 1 and found[0].startswith("human_changes: no answer for h4")
