"""The pipeline page's waits per stage (counts, links to launch, a pinned query count) and the
optional auto-generation after review (LLM_AUTO_GENERATE on and off). Jobs are created only."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import candidates
from annotation.models import CandidateStatus
from annotation.questions import auto_generation
from annotation.questions.llm_jobs import GENERATE
from annotation.review import services
from llm.models import Job, LLMModel
from llm.tasks import run_job_chunk
from rubrics.models import Rubric, RubricVersion, Stage
from rubrics.tests.conftest import make_question

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sent(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(
        run_job_chunk,
        "delay_on_commit",
        lambda job_id: transaction.on_commit(lambda: calls.append(job_id)),
    )
    # A worker's sends (a chunk's successor, the sweep's) are caught too.
    monkeypatch.setattr(
        run_job_chunk,
        "apply_async",
        lambda args, countdown=None, **options: (
            calls.append(args[0]) if countdown is None else None
        ),
    )
    return calls


def rubric_at(source_id: str, *stages: tuple[str, bool]) -> Rubric:
    """A question whose rubric has versions of these (stage, frozen) pairs, in order."""
    rubric = Rubric.objects.create(question=make_question(source_id))
    for stage, frozen in stages:
        RubricVersion.objects.create(
            rubric=rubric, stage=stage, meta_rubric={}, frozen_at=timezone.now() if frozen else None
        )
    return rubric


def waits(client) -> dict[str, int]:
    html = client.get(reverse("pipeline")).content.decode()
    found = {}
    for key in ["generate", "guard", "build", "refine1", "human1", "refine2", "human2", "final"]:
        row = html[html.index(f'data-wait="{key}"') :]
        found[key] = int(row.split('class="num">', 1)[1].split("<", 1)[0])
    return found


def test_pipeline_counts_what_each_stage_waits_for(client, root, make_image):
    make_image("new-1", [])
    make_image("new-2", [])
    make_image("review-1")  # open candidate: waits for people, not a job
    _, [accepted] = make_image("guard-1")
    accepted.status = CandidateStatus.ACCEPTED
    accepted.save()
    make_question("q-build")
    rubric_at("q-r1", (Stage.LLM_DRAFT, True))
    rubric_at("q-h1", (Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True))
    rubric_at(
        "q-h1-open", (Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True), (Stage.HUMAN_1, False)
    )
    rubric_at("q-r2", (Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True), (Stage.HUMAN_1, True))
    rubric_at(
        "q-h2",
        (Stage.LLM_DRAFT, True),
        (Stage.LLM_REFINED_1, True),
        (Stage.HUMAN_1, True),
        (Stage.LLM_REFINED_2, True),
    )
    rubric_at(
        "q-final",
        (Stage.LLM_DRAFT, True),
        (Stage.LLM_REFINED_1, True),
        (Stage.HUMAN_1, True),
        (Stage.LLM_REFINED_2, True),
        (Stage.HUMAN_2, True),
    )
    client.force_login(root)
    assert waits(client) == {
        "generate": 2,
        "guard": 1,
        "build": 1,
        "refine1": 1,
        "human1": 2,
        "refine2": 1,
        "human2": 1,
        "final": 1,
    }
    html = client.get(reverse("pipeline")).content.decode()
    for key in ["generate", "guard", "build", "refine1", "refine2"]:
        assert f"{reverse('jobs')}#launch-{key}" in html


def test_pipeline_is_for_admins(client, alice):
    client.force_login(alice)
    assert client.get(reverse("pipeline")).status_code == 403


def _queries(client) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("pipeline")).status_code == 200
    return len(captured)


def test_pipeline_query_count_does_not_grow(client, root, make_image):
    client.force_login(root)
    make_image("img-0", [])
    rubric_at("q-0", (Stage.LLM_DRAFT, True))
    one = _queries(client)
    for n in range(1, 10):
        make_image(f"img-{n}", [])
        rubric_at(f"q-{n}", (Stage.LLM_DRAFT, True), (Stage.LLM_REFINED_1, True))
    assert _queries(client) == one
    assert one <= 16


# --- auto-generation ---------------------------------------------------------------------------


@pytest.fixture
def model(settings) -> LLMModel:
    settings.LLM_MODEL_GENERATION = "gemini-test"
    return LLMModel.objects.create(name="gemini-test", provider="gemini", model="gemini-2.5-flash")


def discard_twice(candidate, alice, bob, capture) -> None:
    with capture(execute=True):
        services.review_submit(
            user=alice, candidate_id=candidate.pk, decision="discard", reasons=["boilerplate"]
        )
    with capture(execute=True):
        services.review_submit(
            user=bob, candidate_id=candidate.pk, decision="discard", reasons=["boilerplate"]
        )


def test_auto_generation_off_by_default(
    settings, alice, bob, make_image, model, django_capture_on_commit_callbacks
):
    assert settings.LLM_AUTO_GENERATE is False
    _, [candidate] = make_image("img-1")
    discard_twice(candidate, alice, bob, django_capture_on_commit_callbacks)
    assert not Job.objects.exists()


def test_auto_generation_on_launches_for_the_image(
    settings, alice, bob, make_image, model, sent, django_capture_on_commit_callbacks
):
    settings.LLM_AUTO_GENERATE = True
    _, [candidate] = make_image("img-1")
    make_image("img-2", [])  # needs candidates too, but review did not touch it
    discard_twice(candidate, alice, bob, django_capture_on_commit_callbacks)
    job = Job.objects.get()
    assert job.kind == GENERATE and job.launched_by is None
    assert list(job.items.values_list("key", flat=True)) == ["img-1"]
    assert sent == [job.pk]
    # A later change to the same image does not launch a second job while one is pending.
    with django_capture_on_commit_callbacks(execute=True):
        transaction.on_commit(lambda: auto_generation.auto_generate(candidate.image_id))
    assert Job.objects.count() == 1


def test_auto_generation_waits_while_a_candidate_is_pending(
    settings, alice, bob, make_image, model, django_capture_on_commit_callbacks
):
    settings.LLM_AUTO_GENERATE = True
    _, [candidate, _other] = make_image("img-1", ["One question?", "Another question?"])
    discard_twice(candidate, alice, bob, django_capture_on_commit_callbacks)
    assert not Job.objects.exists()


def test_auto_generation_without_a_model_is_logged_not_fatal(
    settings, alice, bob, make_image, caplog, django_capture_on_commit_callbacks
):
    settings.LLM_AUTO_GENERATE = True
    settings.LLM_MODEL_GENERATION = ""
    _, [candidate] = make_image("img-1")
    with caplog.at_level(logging.WARNING, logger="annotation.questions.auto_generation"):
        discard_twice(candidate, alice, bob, django_capture_on_commit_callbacks)
    candidate.refresh_from_db()
    assert candidate.status == CandidateStatus.DISCARDED
    assert not Job.objects.exists()
    assert "auto-generation for image" in caplog.text and "No model is configured" in caplog.text


def test_auto_generation_after_an_adjudicated_discard(
    settings, alice, bob, carol, make_image, model, sent, django_capture_on_commit_callbacks
):
    """The adjudication service asks for generation itself, once its change commits."""
    settings.LLM_AUTO_GENERATE = True
    _, [candidate] = make_image("img-1")
    with django_capture_on_commit_callbacks(execute=True):
        services.review_submit(user=alice, candidate_id=candidate.pk, decision="accept")
    with django_capture_on_commit_callbacks(execute=True):
        services.review_submit(
            user=bob, candidate_id=candidate.pk, decision="discard", reasons=["boilerplate"]
        )
    assert not Job.objects.exists()  # disputed: still pending
    with django_capture_on_commit_callbacks(execute=True):
        services.adjudication_resolve(user=carol, candidate_id=candidate.pk, decision="discard")
    job = Job.objects.get()
    assert list(job.items.values_list("key", flat=True)) == ["img-1"] and sent == [job.pk]


def test_a_status_change_alone_launches_nothing(
    settings, alice, make_image, model, django_capture_on_commit_callbacks
):
    """No hidden hook: only the resolving services ask for generation."""
    settings.LLM_AUTO_GENERATE = True
    _, [candidate] = make_image("img-1")
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        candidates.set_status(
            candidate, CandidateStatus.DISCARDED, actor=alice, reason="by hand", now=timezone.now()
        )
    assert callbacks == [] and not Job.objects.exists()
