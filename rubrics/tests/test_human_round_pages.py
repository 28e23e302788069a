"""What refinement round 2 did with human round 1's changes, on the pages: the refinement's own
page, the rubric's history, and the human round 2 workspace (dropped changes listed with the
LLM's reasons, the checks carrying a change marked, in every edit's answer too). Query counts
pinned: the outcome comes with the version's own row (or its parent's, in the same join)."""

from __future__ import annotations

import copy

import pytest
from django.urls import reverse

from rubrics import compiler, services
from rubrics.human_changes import Answer, CheckRow, derive_changes, outcomes
from rubrics.models import Origin, RubricVersion, Stage
from rubrics.tests.conftest import sample_meta

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
EDITED = "The stew comes from Burgundy, in eastern France."
ADDED = "يُقدَّم مع البطاطا 配土豆"


def rows(version: RubricVersion, *, human: bool = False) -> list[CheckRow]:
    return [
        CheckRow(
            r.check_id,
            r.text,
            r.tier,
            added=human and r.origin == Origin.ADDED,
            deleted=r.deleted_at is not None,
            reason=r.delete_reason,
            source=r.source,
        )
        for r in version.checks.order_by("position")
    ]


def act(dave, version: RubricVersion, service, **fields) -> None:
    version.refresh_from_db()
    service(user=dave, version_id=version.pk, revision=version.revision, **fields)


@pytest.fixture
def refined_2(dave, question) -> RubricVersion:
    """A rubric through refinement round 2: human round 1 edited I1, re-tiered I2.item1, added
    a check in Arabic and Chinese and deleted I2.item3; the refinement kept the edit, the
    deletion and the addition (in a new fact I5) and dropped the re-tier with a reason."""
    meta = sample_meta()
    refined = services.rubric_version_create(
        question=question(), meta_document=meta, stage=Stage.LLM_REFINED_1
    )
    human = services.revision_claim(user=dave)
    check = {r.check_id: r.pk for r in human.checks.all()}
    act(dave, human, services.check_edit_text, check_pk=check["I1"], text=EDITED)
    act(dave, human, services.check_retier, check_pk=check["I2.item1"], tier="context")
    act(dave, human, services.check_add, text=ADDED, tier="valuable")
    act(dave, human, services.check_delete, check_pk=check["I2.item3"], reason="not core")
    act(dave, human, services.revision_complete)
    changes = derive_changes(rows(refined), rows(human, human=True))
    assert [(c.id, c.op) for c in changes] == [
        ("h1", "edit"),
        ("h2", "retier"),
        ("h3", "delete"),
        ("h4", "add"),
    ]
    rebuilt = copy.deepcopy(meta)
    rebuilt["items"][0]["statement"] = EDITED
    rebuilt["items"][1]["items"] = rebuilt["items"][1]["items"][:2]
    rebuilt["items"].append({"id": "I5", "type": "fact", "tier": "valuable", "statement": ADDED})
    answers = [
        Answer("h1", "carried", "I1"),
        Answer("h2", "dropped", "", "Every source lists the beef as required."),
        Answer("h3", "carried", "I2"),
        Answer("h4", "carried", "I5"),
    ]
    kept = outcomes(changes, answers, compiler.compile_document(rebuilt))
    return services.rubric_version_create(
        question=human.rubric.question,
        meta_document=rebuilt,
        stage=Stage.LLM_REFINED_2,
        made_by_model="gemini-test",
        human_changes=kept,
    )


def page(client, name: str, *args) -> str:
    response = client.get(reverse(name, args=args))
    assert response.status_code == 200
    return response.content.decode()


def test_the_refinements_page_says_what_it_did_with_each_change(client, root, refined_2):
    client.force_login(root)
    body = page(client, "rubric_workspace", refined_2.pk)
    assert "What this refinement did with human round 1" in body
    assert "The LLM dropped 1 of the 4 changes of human round 1" in body
    dropped = body.split('data-testid="dropped-h2"', 1)[1].split("</li>", 1)[0]
    assert "from answer-critical to context" in dropped
    assert "Every source lists the beef as required." in dropped
    carried = body.split('data-testid="carried-h4"', 1)[1].split("</li>", 1)[0]
    assert ADDED in carried and "in I5 (check I5)" in carried
    assert "the check is gone from I2" in body.split('data-testid="carried-h3"', 1)[1]
    # Plain words only: no stored keys on the page.
    assert "answer_critical" not in dropped and "retier" not in dropped
    # The checks that carry a change are marked.
    assert 'data-testid="carries-I1"' in body and 'data-testid="carries-I5"' in body
    assert 'data-testid="carries-I2.item1"' not in body


def test_the_history_lists_what_the_llm_dropped_or_changed(client, root, refined_2):
    client.force_login(root)
    body = page(client, "rubric_history", refined_2.rubric_id)
    section = body.split(f'data-testid="human-round-{refined_2.pk}"', 1)[1]
    assert "LLM refinement 2: what the LLM dropped or changed of human round 1" in section
    assert "Every source lists the beef as required." in section
    assert f'data-testid="human-round-{refined_2.parent_id}"' not in body  # the others: none


def test_human_round_2_sees_the_dropped_changes_and_the_carrying_checks(
    client, dave, refined_2, django_assert_num_queries
):
    draft = services.revision_claim(user=dave)
    assert draft.stage == Stage.HUMAN_2 and draft.parent_id == refined_2.pk
    client.force_login(dave)
    with django_assert_num_queries(7):  # as any workspace page (test_workspace.py)
        body = page(client, "rubric_workspace", draft.pk)
    assert "Human round 1, through refinement round 2" in body
    assert 'data-testid="human-changes-dropped"' in body
    assert "Every source lists the beef as required." in body
    assert "the reviser&#x27;s edit (h1) of human round 1" in body
    # An edit's answer draws the check again: still marked, in the same number of queries.
    row = draft.checks.get(check_id="I1")
    with django_assert_num_queries(12):
        response = client.post(
            reverse("rubric_check_text", args=[draft.pk, row.pk]),
            {"text": "Edited again.", "revision": draft.revision},
            **HTMX,
        )
    assert response.status_code == 200
    assert 'data-testid="carries-I1"' in response.content.decode()


def test_a_human_round_1_page_has_no_such_notice(client, dave, question):
    services.rubric_version_create(
        question=question(), meta_document=sample_meta(), stage=Stage.LLM_REFINED_1
    )
    draft = services.revision_claim(user=dave)
    client.force_login(dave)
    body = page(client, "rubric_workspace", draft.pk)
    assert 'data-testid="human-changes"' not in body and "carries" not in body


def test_the_history_page_reads_as_many_queries_with_outcomes_as_without(
    client, root, refined_2, django_assert_num_queries
):
    """The outcome comes with its version's row: showing it costs no query."""
    client.force_login(root)
    with django_assert_num_queries(HISTORY_QUERIES):
        assert "human-round-" in page(client, "rubric_history", refined_2.rubric_id)
    RubricVersion.objects.filter(pk=refined_2.pk).update(human_changes=None)
    with django_assert_num_queries(HISTORY_QUERIES):
        assert "human-round-" not in page(client, "rubric_history", refined_2.rubric_id)


HISTORY_QUERIES = 9
