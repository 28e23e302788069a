"""Candidate generation (A.1) and the guard (A.2) through the job system, with the real
google-genai client talking to the fake Gemini server (tests/fake_llm.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import AuditEvent, Candidate, CandidateOrigin, CandidateStatus, FinalQuestion
from annotation.questions import llm_jobs
from conftest import png_bytes
from llm import jobs
from llm.fencing import fenced_texts, outside_fences
from llm.gateway import Gateway, GatewaySettings
from llm.models import ItemStatus, Job, JobItem, JobStatus, LLMModel
from llm.ratelimit import MemoryTokenBucket
from llm.tasks import run_job_chunk
from tests.fake_llm import GEMINI_KEY, FakeLLM, Reply, fake_llm  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)  # the chunk records from its own thread

QUESTIONS = [
    "What kind of stew is this and how is it traditionally made?",
    "Where does this dish come from and how has the recipe changed over time?",
    "What wine would go with this dish, and why does it suit it?",
]


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """Chunk tasks caught instead of going to a broker; the tests run chunks in-process."""
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


@pytest.fixture
def fake(fake_llm: FakeLLM) -> FakeLLM:  # noqa: F811 (the imported fixture)
    return fake_llm


@pytest.fixture
def model(settings) -> LLMModel:
    settings.LLM_MODEL_GENERATION = settings.LLM_MODEL_GUARD = "gemini-test"
    return LLMModel.objects.create(
        name="gemini-test", provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )


def gateway_factory(fake: FakeLLM) -> Callable[[], Gateway]:
    conf = GatewaySettings(
        gemini_api_key=GEMINI_KEY,
        gemini_base_url=fake.base_url,
        timeout_s=5,
        max_attempts=2,
        backoff_base_s=0.01,
        backoff_cap_s=0.02,
    )
    return lambda: Gateway(limiter=MemoryTokenBucket(), conf=conf)


def drain(job: Job, fake: FakeLLM) -> Job:
    try:
        while jobs.job_run_chunk(job_id=job.pk, gateway_factory=gateway_factory(fake)):
            pass
    finally:
        connections.close_all()
    job.refresh_from_db()
    return job


def reply(payload: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps(payload))


def verdict(
    candidate: Candidate,
    *,
    ok: bool = True,
    stranger: bool = True,
    boilerplate: bool = False,
    reason: str = "fine",
) -> dict[str, Any]:
    return {
        "id": candidate.pk,
        "passes_hard_requirements": ok,
        "stranger_test_pass": stranger,
        "boilerplate": boilerplate,
        "reason": reason,
    }


def accept(*candidates: Candidate) -> None:
    Candidate.objects.filter(pk__in=[c.pk for c in candidates]).update(
        status=CandidateStatus.ACCEPTED, resolved_at=timezone.now()
    )


def image_parts(fake: FakeLLM, index: int = 0) -> list[dict[str, Any]]:
    return fake.requests[index].body["contents"][0]["parts"]


# --- generation ------------------------------------------------------------------------------


def test_generation_creates_llm_candidates_in_the_next_round_with_the_image_inline(
    sent, model, make_image, fake, root
):
    image, (old,) = make_image("img-1", entity="Beef bourguignon", domain="food")
    Candidate.objects.filter(pk=old.pk).update(status=CandidateStatus.DISCARDED)
    make_image("img-2")  # has an open candidate: does not need new ones
    fake.queue(reply({"questions": QUESTIONS}))

    job = drain(llm_jobs.generation_launch(user=root), fake)

    assert (job.status, job.items_done, job.launched_by) == (JobStatus.DONE, 1, root)
    assert JobItem.objects.get(job=job).key == "img-1"  # only the image needing candidates
    new = list(Candidate.objects.filter(image=image, origin=CandidateOrigin.LLM))
    assert [c.text for c in new] == QUESTIONS
    assert {(c.round, c.status, c.author_id) for c in new} == {(2, CandidateStatus.OPEN, None)}
    assert JobItem.objects.get(job=job).result == {
        "image": "img-1",
        "round": 2,
        "candidates": [c.pk for c in new],
    }
    parts = image_parts(fake)
    inline = next(p["inlineData"] for p in parts if "inlineData" in p)
    assert (inline.get("mimeType") or inline.get("mime_type")) == "image/png"
    assert base64.b64decode(inline["data"]) == png_bytes()
    prompt = next(p["text"] for p in parts if "text" in p)
    assert "Beef bourguignon" in prompt and "stranger" in prompt  # grounding, not the question
    assert job.tokens_in > 0 and model.name == job.params["model"]


def test_a_redelivered_item_creates_nothing_twice(sent, model, make_image, fake, root):
    image, (old,) = make_image("img-1")
    Candidate.objects.filter(pk=old.pk).update(status=CandidateStatus.DISCARDED)
    fake.default = reply({"questions": QUESTIONS})
    job = drain(llm_jobs.generation_launch(user=root, image_ids=[image.pk]), fake)
    item = JobItem.objects.get(job=job)
    first = item.result
    # The worker applied the result but died before recording it: the lease expires and the
    # item is claimed again.
    JobItem.objects.filter(pk=item.pk).update(
        status=ItemStatus.RUNNING, lease_until=timezone.now() - timedelta(seconds=1)
    )
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        finished_at=None,
        items_done=F("items_done") - 1,
        items_remaining=1,
    )
    calls = len(fake.requests)

    job = drain(job, fake)

    item.refresh_from_db()
    assert (job.status, item.status, item.attempts) == (JobStatus.DONE, ItemStatus.DONE, 2)
    assert item.result == first
    assert Candidate.objects.filter(image=image, origin=CandidateOrigin.LLM).count() == 3
    assert len(fake.requests) == calls  # applied already: no second call either
    # A direct second application (two deliveries racing past the read) is refused too.
    again = llm_jobs.apply_generation(
        job_id=job.pk, key=item.key, image_id=image.pk, questions=["Something else entirely?"] * 3
    )
    assert again == first and Candidate.objects.filter(image=image).count() == 4


def test_invalid_output_past_the_repairs_fails_the_item_with_its_reason_and_raw_text(
    sent, model, make_image, fake, root
):
    image, (old,) = make_image("img-1")
    Candidate.objects.filter(pk=old.pk).update(status=CandidateStatus.DISCARDED)
    fake.queue(
        Reply(text="not json at all"),
        Reply(text="[]"),
        reply({"questions": ["Only one question?"]}),
    )  # the last repair: too few

    job = drain(llm_jobs.generation_launch(user=root), fake)

    item = JobItem.objects.get(job=job)
    assert (job.status, job.items_failed, item.status) == (JobStatus.DONE, 1, ItemStatus.FAILED)
    assert item.last_error.startswith("invalid_output")
    assert "questions" in item.last_error
    assert item.raw_output == json.dumps({"questions": ["Only one question?"]})
    assert len(fake.requests) == 3  # the call and its two repairs
    assert Candidate.objects.filter(image=image).count() == 1


# --- guard -----------------------------------------------------------------------------------


def test_guard_rejects_a_leading_one_with_its_reason_selects_and_promotes(
    sent, model, make_image, fake, root
):
    image, (leading, good, plain) = make_image(
        "img-1",
        texts=[
            "How does this engine's turbocharger improve on the previous generation?",
            "What kind of car is this and how does it perform?",
            "What is this and what is its history?",
        ],
    )
    accept(leading, good, plain)
    reason = "Presumes the car and its engine history are already recognized."
    fake.queue(
        reply(
            {
                "verdicts": [
                    verdict(leading, ok=False, stranger=False, reason=reason),
                    verdict(good),
                    verdict(plain, boilerplate=True, reason="fits any car"),
                ],
                "selected": good.pk,
                "new_candidates": [],
            }
        )
    )

    job = drain(llm_jobs.guard_launch(user=root), fake)

    assert (job.status, job.items_done) == (JobStatus.DONE, 1)
    question = FinalQuestion.objects.get(image=image)
    assert (question.candidate_id, question.method, question.promoted_by) == (
        good.pk,
        FinalQuestion.Method.GUARD,
        None,
    )
    verdicts = {e.candidate_id: e.data for e in AuditEvent.objects.filter(action="guard.verdict")}
    assert verdicts[leading.pk]["reason"] == reason
    assert verdicts[leading.pk]["stranger_test_pass"] is False
    assert verdicts[good.pk]["selected"] is True and verdicts[plain.pk]["boilerplate"] is True
    result = JobItem.objects.get(job=job).result
    assert (result["selected"], result["rejected"], result["proposed"]) == (
        good.pk,
        [leading.pk],
        [],
    )
    prompt = next(p["text"] for p in image_parts(fake) if "text" in p)
    # Each candidate in its own fence, after its id (guard v3 on).
    assert f"- id {leading.pk}:\n<<<CANDIDATES>>>" in outside_fences(prompt)
    assert ("CANDIDATES", leading.text) in fenced_texts(prompt)
    assert any("inlineData" in p for p in image_parts(fake))


def test_guard_repairs_an_inconsistent_selection(sent, model, make_image, fake, root):
    image, (leading, good) = make_image("img-1", texts=["Leading?", "Good?"])
    accept(leading, good)
    bad = {
        "verdicts": [verdict(leading, ok=False, stranger=False), verdict(good)],
        "selected": leading.pk,
        "new_candidates": [],
    }
    fake.queue(reply(bad), reply({**bad, "selected": good.pk}))

    drain(llm_jobs.guard_launch(user=root, image_ids=[image.pk]), fake)

    assert FinalQuestion.objects.get(image=image).candidate_id == good.pk
    repair = json.dumps(fake.requests[1].body["contents"][-1])
    assert "fails a hard requirement" in repair


def test_guard_answer_naming_ids_it_was_not_given_is_repaired_never_cached(
    sent, model, make_image, fake, root
):
    image, (first, second) = make_image("img-1", texts=["First?", "Second?"])
    accept(first, second)
    fake.default = reply(
        {"verdicts": [verdict(first), verdict(second)], "selected": second.pk, "new_candidates": []}
    )
    fake.inject("ignores_ids", rate=1.0)  # every answer names ids + 1000

    job = drain(llm_jobs.guard_launch(user=root, image_ids=[image.pk]), fake)

    item = JobItem.objects.get(job=job)
    assert item.status == ItemStatus.FAILED and "candidate id" in item.last_error
    assert f'"id": {first.pk + 1000}' in item.raw_output
    assert len(fake.requests) == 3  # the answer and two repairs, each told the ids
    for repair in fake.requests[1:]:
        told = json.dumps(repair.body["contents"][-1])
        assert f"give exactly one verdict per candidate id {sorted([first.pk, second.pk])}" in told
    assert not FinalQuestion.objects.filter(image=image).exists()

    # The model behaves again: retrying calls it (nothing bad was cached) and promotes.
    fake.faults.clear()
    jobs.job_retry_failed(job_id=job.pk)
    job = drain(job, fake)
    assert (job.items_done, job.items_failed) == (1, 0) and len(fake.requests) == 4
    assert FinalQuestion.objects.get(image=image).candidate_id == second.pk


def test_guard_proposes_new_candidates_when_all_accepted_ones_are_boilerplate(
    sent, model, make_image, fake, root
):
    image, (first, second) = make_image(
        "img-1", texts=["What is this dish?", "What is the history of this dish?"]
    )
    accept(first, second)
    proposals = [
        "Why does this stew taste better the day after it is cooked?",
        "What cut of beef suits this dish and how long should it braise?",
        "How did this dish go from peasant food to a restaurant classic?",
    ]
    fake.queue(
        reply(
            {
                "verdicts": [verdict(first, boilerplate=True), verdict(second, boilerplate=True)],
                "selected": None,
                "new_candidates": proposals,
            }
        )
    )

    job = drain(llm_jobs.guard_launch(user=root), fake)

    assert job.items_done == 1 and not FinalQuestion.objects.filter(image=image).exists()
    new = list(Candidate.objects.filter(image=image, origin=CandidateOrigin.GUARD))
    assert [c.text for c in new] == proposals
    assert {(c.round, c.status) for c in new} == {(2, CandidateStatus.OPEN)}
    assert JobItem.objects.get(job=job).result["proposed"] == [c.pk for c in new]
    assert AuditEvent.objects.filter(action="guard.verdict").count() == 2


# --- launching -------------------------------------------------------------------------------


def test_launch_refuses_without_a_configured_model(sent, settings, make_image, root):
    image, (candidate,) = make_image("img-1")
    accept(candidate)
    settings.LLM_MODEL_GENERATION = ""
    with pytest.raises(jobs.JobError, match="LLM_MODEL_GENERATION"):
        llm_jobs.generation_launch(user=root, image_ids=[image.pk])
    settings.LLM_MODEL_GUARD = "missing-model"
    with pytest.raises(jobs.JobError, match="'missing-model', which does not exist"):
        llm_jobs.guard_launch(user=root)
    assert not Job.objects.exists() and sent == []


def test_launch_refuses_an_empty_scope(sent, model, make_image, root):
    make_image("img-1")  # an open candidate: neither generation nor the guard applies
    with pytest.raises(jobs.JobError, match="No image"):
        llm_jobs.generation_launch(user=root)
    with pytest.raises(jobs.JobError, match="No image"):
        llm_jobs.guard_launch(user=root)


# --- the guard given the over-represented templates (prompt v2) ------------------------------


def finals(make_image, texts: list[tuple[str, str, str]]) -> None:
    for source_id, entity, text in texts:
        image, (candidate,) = make_image(source_id, [text], entity=entity, domain="vehicles")
        FinalQuestion.objects.create(image=image, candidate=candidate, text=text, method="manual")


def test_the_guard_is_told_the_over_represented_templates_and_their_shares(
    sent, model, make_image, fake, root
):
    from django.core.cache import cache

    cache.clear()
    finals(
        make_image,
        [
            ("f-1", "Vespa", "What is this Vespa, and how fast does it go?"),
            ("f-2", "Unimog", "What is this Unimog, and how fast does it go?"),
            ("f-3", "Ducati", "What is this Ducati, and how fast does it go?"),
            ("f-4", "Ramen", "Who invented this broth, and where did it spread?"),
        ],
    )
    image, (first, second) = make_image("img-1", texts=["First?", "Second?"])
    accept(first, second)
    fake.queue(reply({"verdicts": [verdict(first), verdict(second)], "selected": second.pk}))

    job = drain(llm_jobs.guard_launch(user=root), fake)

    assert job.params["prompt_version"] == 3
    # Fixed at launch: the one template of more than one question, with its share.
    assert job.params["overrepresented"] == [
        {
            "skeleton": "what is this <entity> and how fast does it go",
            "size": 3,
            "share": 0.75,
            "of": 4,
        }
    ]
    prompt = next(p["text"] for p in image_parts(fake) if "text" in p)
    assert "- 3 of 4 final questions (75%):\n<<<OVERREPRESENTED>>>" in outside_fences(prompt)
    assert ("OVERREPRESENTED", "what is this <entity> and how fast does it go") in (
        fenced_texts(prompt)
    )
    # The answer is handled as before: the selected candidate became the question.
    assert FinalQuestion.objects.get(image=image).candidate_id == second.pk
    from llm.models import LedgerEntry

    call = LedgerEntry.objects.get(job_id=job.pk)
    assert (call.template_name, call.template_version) == ("guard", "3")


def test_a_guard_job_of_prompt_v1_is_sent_v1_without_the_templates(
    sent, model, make_image, fake, root
):
    image, (only,) = make_image("img-1", texts=["Only?"])
    accept(only)
    job = jobs.job_launch(
        kind=llm_jobs.GUARD,
        items=[("img-1", {"image_id": image.pk})],
        user=root,
        params={"model": model.name, "prompt_version": 1},
    )
    fake.queue(reply({"verdicts": [verdict(only)], "selected": only.pk}))
    drain(job, fake)
    prompt = next(p["text"] for p in image_parts(fake) if "text" in p)
    assert "over-represented" not in prompt and f"id {only.pk}: Only?" in prompt
    assert FinalQuestion.objects.get(image=image).candidate_id == only.pk


def test_a_guard_job_of_prompt_v2_is_sent_v2s_listings(sent, model, make_image, fake, root):
    # A job launched before v3 keeps its version, and v2's listings are plain lines.
    image, (only,) = make_image("img-1", texts=["Only?"])
    accept(only)
    templates = [{"skeleton": "what is this <entity>", "size": 2, "share": 0.5, "of": 4}]
    job = jobs.job_launch(
        kind=llm_jobs.GUARD,
        items=[("img-1", {"image_id": image.pk})],
        user=root,
        params={"model": model.name, "prompt_version": 2, "overrepresented": templates},
    )
    fake.queue(reply({"verdicts": [verdict(only)], "selected": only.pk}))
    drain(job, fake)
    prompt = next(p["text"] for p in image_parts(fake) if "text" in p)
    assert f"- id {only.pk}: Only?" in prompt and "<<<" not in prompt
    assert "- “what is this <entity>”: 2 of 4 final questions (50%)" in prompt
    assert FinalQuestion.objects.get(image=image).candidate_id == only.pk


def test_without_templates_yet_the_guard_is_told_none(sent, model, make_image, fake, root):
    from django.core.cache import cache

    cache.clear()
    image, (only,) = make_image("img-1", texts=["Only?"])
    accept(only)
    fake.queue(reply({"verdicts": [verdict(only)], "selected": only.pk}))
    job = drain(llm_jobs.guard_launch(user=root), fake)
    assert job.params["overrepresented"] == []
    prompt = next(p["text"] for p in image_parts(fake) if "text" in p)
    assert "while no template holds more than one final question):\n(none)\n" in prompt
    assert "OVERREPRESENTED" not in prompt
