"""End to end through a real Celery worker on a real Redis, the real google-genai client talking
to the fake Gemini server: import, generation, review (through the services), guard, rubric
construction, refinement round 1, a human round (through the rubric services), refinement
round 2, then stage 3: an evaluated model's answer collected and judged check by check.

The fake answers each call by what it asks for (a pipeline fake, composed on tests/fake_llm.py):
a search (googleSearch tool) gets grounded text, an audit (urlContext tool) notes in prose, a
structured call an answer that fits its response schema (an entity proposal naming the dish;
the audit's verdicts one per snippet
id in its prompt, the guard's selecting the first candidate id in its prompt, a rebuild the
demo provider's, which carries the human round's changes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from annotation.images.importing import images_import, manifest_parse
from annotation.models import Candidate, CandidateOrigin, CandidateStatus, FinalQuestion
from annotation.questions import llm_jobs as annotation_jobs
from annotation.review import services as review
from conftest import png_bytes
from judging.leaderboard.board import leaderboard
from judging.models import EvaluatedModel, Judge, Response, Verdict
from judging.runs import llm_jobs as judging_jobs
from llm import jobs
from llm.fencing import outside_fences
from llm.models import Job, JobStatus, LLMModel
from rubrics import llm_jobs as rubric_jobs
from rubrics import services as rubric_services
from rubrics.models import RubricVersion, Stage
from tests.fake_llm import (
    GEMINI_KEY,
    FakeLLM,
    Recorded,
    Reply,
    demo_reply,
    grounding_metadata,
    start_fake_llm,
)
from tests.processes import child_database_url
from tests.test_worker import celery_app, redis_url, stop  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(settings.BASE_DIR)
MODEL = "gemini-e2e"
QUESTIONS = [
    "What kind of stew is this and how is it traditionally made?",
    "Where does this dish come from and how has the recipe changed over time?",
    "What wine would go with this dish, and why does it suit it?",
]
SOURCES = [("Burgundy wine", "wine.example"), ("French stews", "stew.example")]
SUPPORTS = [
    ("Beef bourguignon is braised in red Burgundy wine.", [0]),
    ("It includes lardons, mushrooms and pearl onions.", [0, 1]),
]
ITEMS = [
    {
        "id": "I1",
        "type": "fact",
        "tier": "answer_critical",
        "statement": "It is braised in red wine.",
        "snippets": ["s1"],
    },
    {
        "id": "I2",
        "type": "strict_list",
        "tier": "valuable",
        "topic": "garnish of beef bourguignon",
        "items": ["lardons", "mushrooms", "pearl onions"],
        "snippets": ["s2", "s3"],
    },
]


ANSWER = "It is beef bourguignon, braised in Burgundy wine with lardons and mushrooms."


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(
        part.get("text", "")
        for content in body.get("contents", [])
        for part in content.get("parts", [])
    )


def pipeline_reply(recorded: Recorded) -> Reply:
    """What the pipeline's call expects, told by its tools, its schema and its prompt."""
    body = recorded.body
    tools = json.dumps(body.get("tools", []))
    if "googleSearch" in tools:
        return Reply(
            text=" ".join(t for t, _ in SUPPORTS), grounding=grounding_metadata(SOURCES, SUPPORTS)
        )
    if "urlContext" in tools:  # prose, as real models write it: the next call structures it
        return Reply(
            text="Every source was opened; each says what its snippet says.",
            url_context={"urlMetadata": []},
        )
    schema = (body.get("generationConfig") or {}).get("responseJsonSchema") or {}
    if not schema:  # free text: an evaluated model's answer
        return Reply(text=ANSWER)
    fields = set(schema.get("properties", {}))
    if "verdict" in fields:  # a judge's verdict on one check
        return Reply(text=json.dumps({"verdict": "meets", "rationale": "it says so"}))
    if "questions" in fields:
        return Reply(text=json.dumps({"questions": QUESTIONS}))
    if "popularity" in fields:  # an entity proposal for a CRAG-MM row without one
        return Reply(
            text=json.dumps(
                {"entity": "Beef bourguignon", "popularity": "head", "reason": "the answer says so"}
            )
        )
    if "partial_coverage" in fields:  # the audit's notes, structured
        listed = re.findall(r"^- (s\d+):$", outside_fences(_prompt(body)), re.MULTILINE)
        ids = sorted(set(listed), key=lambda s: int(s[1:]))
        return Reply(
            text=json.dumps(
                {
                    "verdicts": [
                        {"id": sid, "verdict": "verified", "reason": "the page says so"}
                        for sid in ids
                    ],
                    "partial_coverage": [],
                }
            )
        )
    if "verdicts" in fields:
        ids = [
            int(i)
            for i in re.findall(r"^- id (\d+):$", outside_fences(_prompt(body)), re.MULTILINE)
        ]
        return Reply(
            text=json.dumps(
                {
                    "verdicts": [
                        {
                            "id": i,
                            "passes_hard_requirements": True,
                            "stranger_test_pass": True,
                            "boilerplate": False,
                            "reason": "clear and visual",
                        }
                        for i in ids
                    ],
                    "selected": ids[0] if ids else None,
                    "new_candidates": [],
                }
            )
        )
    if "dropped" in fields:  # a rebuild: the demo provider's, which carries the human changes
        return demo_reply(recorded)
    if "items" in fields:
        return Reply(text=json.dumps({"items": ITEMS}))
    return Reply(
        status=400,
        error_body={
            "error": {"code": 400, "message": "unexpected call", "status": "INVALID_ARGUMENT"}
        },
    )


class PipelineFake(FakeLLM):
    """The fake, answering by request instead of from a queue (queued replies still win)."""

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
        return pipeline_reply(recorded)


@pytest.fixture
def fake() -> Any:
    control, server = start_fake_llm()
    # Same server, same handler: only the control object that picks replies is ours.
    pipeline = PipelineFake(base_url=control.base_url)
    server.RequestHandlerClass.fake = pipeline
    try:
        yield pipeline
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def worker(fake, redis_url, tmp_path, settings):  # noqa: F811 (fixture)
    settings.LLM_MODEL_GENERATION = settings.LLM_MODEL_GUARD = MODEL
    settings.LLM_MODEL_RUBRICS = MODEL
    LLMModel.objects.create(
        name=MODEL, provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=child_database_url(),
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        GEMINI_BASE_URL=fake.base_url,
        GEMINI_API_KEY=GEMINI_KEY,
        LLM_MODEL_GENERATION=MODEL,
        LLM_MODEL_GUARD=MODEL,
        LLM_MODEL_RUBRICS=MODEL,
        LLM_TIMEOUT_SECONDS="10",
        LLM_MAX_ATTEMPTS="2",
        LLM_BACKOFF_BASE_MS="50",
        LLM_BACKOFF_CAP_SECONDS="1",
    )
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "gamut_site",
                "worker",
                "--pool=solo",
                "--loglevel=WARNING",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"e2e-{os.getpid()}@%h",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc, log_path
    finally:
        stop(proc, timeout=15)


def finish(job: Job, worker: tuple[subprocess.Popen, Path], timeout: float = 30) -> Job:
    """Poll the job row until it is over (bounded), and insist every item is done."""
    proc, log_path = worker
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status not in jobs.ACTIVE or proc.poll() is not None:
            break
        time.sleep(0.1)
    progress = jobs.job_progress(job)
    assert job.status == JobStatus.DONE and job.items_failed == 0, (
        f"job {job.kind} at {progress} (worker exit {proc.poll()}):\n{log_path.read_text()}"
    )
    return job


def test_the_whole_pipeline_runs_through_a_real_worker(
    celery_app, worker, fake, tmp_path, root, alice, bob, dave
):  # noqa: F811
    # Import: a manifest line and its PNG, through the import service.
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "stew.png").write_bytes(png_bytes())
    line = json.dumps(
        {
            "source_id": "img-e2e",
            "image": "stew.png",
            "entity": "Beef bourguignon",
            "domain": "food",
            "popularity": "head",
        }
    )
    imported = images_import(
        manifest_parse([line], folder), actor=root, source="upload", file_name="manifest.jsonl"
    )
    assert imported.imported == ["img-e2e"]

    # Generation (A.1) in the worker: the image's candidates.
    finish(annotation_jobs.generation_launch(user=root), worker)
    candidates = list(Candidate.objects.filter(image__source_id="img-e2e").order_by("pk"))
    assert [(c.text, c.origin, c.status) for c in candidates] == [
        (q, CandidateOrigin.LLM, CandidateStatus.OPEN) for q in QUESTIONS
    ]

    # Review through the services: two annotators accept the second candidate.
    chosen = candidates[1]
    for annotator in (alice, bob):
        review.review_submit(user=annotator, candidate_id=chosen.pk, decision="accept")
    chosen.refresh_from_db()
    assert chosen.status == CandidateStatus.ACCEPTED

    # The guard (A.2) promotes it.
    finish(annotation_jobs.guard_launch(user=root), worker)
    question = FinalQuestion.objects.get(image__source_id="img-e2e")
    assert (question.candidate_id, question.text) == (chosen.pk, chosen.text)
    guard_prompt = _prompt(
        next(
            r.body
            for r in fake.requests
            if "verdicts" in json.dumps(r.body.get("generationConfig", {}))
        )
    )
    assert f"- id {chosen.pk}:" in guard_prompt

    # Rubric construction (A.3): the draft.
    finish(rubric_jobs.rubric_build_launch(user=root), worker)
    draft = RubricVersion.objects.get(rubric__question=question, stage=Stage.LLM_DRAFT)
    assert [s["id"] for s in draft.meta_rubric["snippets"]] == ["s1", "s2", "s3"]
    assert draft.checks.count() == 4  # I1 and the garnish's three items

    # Refinement round 1 (A.4).
    finish(rubric_jobs.rubric_refine_launch(user=root, round=1), worker)
    refined = RubricVersion.objects.get(rubric__question=question, stage=Stage.LLM_REFINED_1)
    assert refined.parent == draft

    # A human round through the rubric services: claim, one edit, complete.
    version = rubric_services.revision_claim(user=dave)
    assert version is not None and version.stage == Stage.HUMAN_1
    row = version.checks.get(check_id="I1")
    rubric_services.check_edit_text(
        user=dave,
        version_id=version.pk,
        check_pk=row.pk,
        text="The beef is braised in Burgundy wine.",
        revision=version.revision,
    )
    version.refresh_from_db()
    rubric_services.revision_complete(user=dave, version_id=version.pk, revision=version.revision)
    human = RubricVersion.objects.get(rubric__question=question, stage=Stage.HUMAN_1)
    assert human.frozen_at is not None

    # Refinement round 2, which sees the human edit.
    fake.requests.clear()
    finish(rubric_jobs.rubric_refine_launch(user=root, round=2), worker)
    second = RubricVersion.objects.get(rubric__question=question, stage=Stage.LLM_REFINED_2)
    assert second.parent == human
    rebuild = next(
        r.body for r in fake.requests if "dropped" in json.dumps(r.body.get("generationConfig", {}))
    )
    assert "The beef is braised in Burgundy wine." in _prompt(rebuild)
    # The reviser's edit is in the new version, not reverted (issue 21).
    assert [(h["op"], h["outcome"]) for h in second.human_changes] == [("edit", "carried")]
    assert second.checks.filter(text__contains="The beef is braised in Burgundy wine.").exists()

    # Stage 3: the evaluated model answers with the photo, a judge grades each check.
    llm = LLMModel.objects.get(name=MODEL)
    evaluated = EvaluatedModel.objects.create(name="model-e2e", llm_model=llm)
    judge = Judge.objects.create(name="judge-e2e", llm_model=llm)
    finish(
        judging_jobs.collect_launch(user=root, evaluated=evaluated, setting="multimodal"), worker
    )
    response = Response.objects.get(model=evaluated, question=question)
    assert response.text == ANSWER and response.model_version
    fake.requests.clear()
    finish(judging_jobs.judge_launch(user=root, judge=judge), worker)
    assert len(fake.requests) == second.checks.filter(deleted_at__isnull=True).count()
    assert Verdict.objects.filter(judge=judge, check_row__version=second).count() == len(
        fake.requests
    )
    [row] = leaderboard(judge=judge, setting="multimodal").rows
    assert (row.model, row.scored, row.gamut) == ("model-e2e", 1, 100.0)
    assert worker[0].poll() is None, worker[1].read_text()
