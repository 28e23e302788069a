"""One rule for "which version is final" and "what a rubric waits for": RubricQuerySet and
RubricVersionQuerySet, read by the refinement launchers, the pipeline page and the services."""

from __future__ import annotations

import pytest
from django.utils import timezone

from rubrics import services
from rubrics.llm_jobs import eligible_for_refine
from rubrics.models import Rubric, RubricVersion, Stage

from .conftest import make_question

pytestmark = pytest.mark.django_db

# The versions of each rubric, oldest first: (stage, frozen); and what it then waits for.
CHAINS = {
    "a": ([], ""),
    "b": ([(Stage.LLM_DRAFT, True)], "refine1"),
    "c": ([(Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True)], "human1"),
    "d": ([(Stage.IMPORTED, True)], "human1"),
    "e": ([(Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True), (Stage.HUMAN_1, False)], "human1"),
    "f": ([(Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True), (Stage.HUMAN_1, True)], "refine2"),
    "g": (
        [
            (Stage.LLM_DRAFT, True),
            (Stage.LLM_REFINED_1, True),
            (Stage.HUMAN_1, True),
            (Stage.LLM_REFINED_2, True),
        ],
        "human2",
    ),
    "h": (
        [
            (Stage.LLM_DRAFT, True),
            (Stage.LLM_REFINED_1, True),
            (Stage.HUMAN_1, True),
            (Stage.LLM_REFINED_2, True),
            (Stage.HUMAN_2, False),
        ],
        "human2",
    ),
    "i": (
        [
            (Stage.LLM_DRAFT, True),
            (Stage.LLM_REFINED_1, True),
            (Stage.HUMAN_1, True),
            (Stage.LLM_REFINED_2, True),
            (Stage.HUMAN_2, True),
        ],
        "final",
    ),
}


@pytest.fixture
def chains() -> dict[str, Rubric]:
    rubrics = {}
    for name, (versions, _) in CHAINS.items():
        question = make_question(f"img-{name}")
        rubric = Rubric.objects.create(question=question)
        parent = None
        for stage, frozen in versions:
            parent = RubricVersion.objects.create(
                rubric=rubric,
                stage=stage,
                parent=parent,
                meta_rubric={},
                frozen_at=timezone.now() if frozen else None,
            )
        rubrics[name] = rubric
    return rubrics


def test_each_chain_waits_for_its_next_step(chains):
    waits = dict(Rubric.objects.with_waits().values_list("question__image__source_id", "waits_for"))
    assert waits == {f"img-{name}": expected for name, (_, expected) in CHAINS.items()}


def test_the_launchers_take_what_the_rubrics_wait_for(chains):
    by_step = {
        step: sorted(Rubric.objects.waiting_for(step).values_list("question_id", flat=True))
        for step in ("refine1", "refine2")
    }
    assert by_step["refine1"] == [chains["b"].question_id]
    assert by_step["refine2"] == [chains["f"].question_id]
    assert eligible_for_refine(1) == by_step["refine1"]
    assert eligible_for_refine(2) == by_step["refine2"]
    with pytest.raises(ValueError, match="unknown step"):
        Rubric.objects.waiting_for("refine3")


def test_a_dropped_question_waits_for_nothing(chains):
    question = chains["b"].question
    question.dropped_at = timezone.now()
    question.save()
    assert not Rubric.objects.live().waiting_for("refine1").exists()
    assert eligible_for_refine(1) == []


def test_the_final_version_is_the_latest_frozen_one_everywhere(chains):
    expected = {}
    for name, rubric in chains.items():
        frozen = [v for v in rubric.versions.order_by("id") if v.frozen_at is not None]
        expected[rubric.question_id] = frozen[-1].pk if frozen else None
        assert services.final_version(rubric) == (frozen[-1] if frozen else None), name
    final = set(RubricVersion.objects.final().values_list("pk", flat=True))
    assert final == {pk for pk in expected.values() if pk is not None}
    assert set(services.final_version_ids().values_list("id", flat=True)) == final
    assert services.final_versions_of(list(expected)) == {
        q: pk for q, pk in expected.items() if pk is not None
    }
