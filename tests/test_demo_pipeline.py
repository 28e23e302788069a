"""`make run`'s promise: on the demo data, with the demo provider and no network, every LLM
stage launched through `launch_job` runs to its end and leaves its results (candidates, a
question, rubrics, answers, verdicts, a leaderboard row).

The jobs' chunks run in this process (as llm/tests' Harness.drain does), through gateways on
the demo provider; the chunk tasks the services send are caught instead of reaching a broker.
"""

from __future__ import annotations

import threading
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connections, transaction

from annotation.models import Candidate, CandidateOrigin, FinalQuestion
from judging.leaderboard.board import leaderboard
from judging.models import Judge, Response, Verdict
from llm import jobs
from llm.demo import DEMO_EVALUATED_MODEL, DEMO_JUDGE, DEMO_STAGE_MODELS
from llm.gateway import Gateway, GatewaySettings
from llm.models import Job, LedgerEntry, LLMModel, Provider
from llm.ratelimit import MemoryTokenBucket
from rubrics import services as rubric_services
from rubrics.models import RubricVersion, Stage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(settings, monkeypatch):
    """The demo data and its LLM models, as after `make run`: no stage's setting names a model,
    so each stage uses its demo model; without the demo's delay."""
    from llm.tasks import run_job_chunk

    monkeypatch.setattr(
        run_job_chunk, "delay_on_commit", lambda job_id: transaction.on_commit(lambda: None)
    )
    call_command("load_demo", stdout=StringIO())
    for setting in DEMO_STAGE_MODELS:
        setattr(settings, setting, "")
    LLMModel.objects.filter(provider=Provider.DEMO).update(parameters={"demo_delay_seconds": 0})


def _gateway() -> Gateway:
    return Gateway(limiter=MemoryTokenBucket(), conf=GatewaySettings())


def drain(job: Job) -> Job:
    while jobs.job_run_chunk(job_id=job.pk, gateway_factory=_gateway):
        pass
    job.refresh_from_db()
    return job


def launch(*args: str) -> Job:
    out = StringIO()
    call_command("launch_job", *args, stdout=out)
    job = Job.objects.order_by("-pk").first()
    assert job is not None and f"job {job.pk} launched" in out.getvalue()
    return job


def launch_and_drain(*args: str) -> Job:
    job = drain(launch(*args))
    failures = list(job.items.filter(status="failed").values_list("key", "last_error"))
    assert (job.status, job.items_failed, failures) == ("done", 0, [])
    return job


def _human_round(reviser: User) -> int:
    """A reviser completes every human round waiting (through the workspace's services)."""
    done = 0
    while (version := rubric_services.revision_claim(user=reviser)) is not None:
        rubric_services.revision_complete(
            user=reviser, version_id=version.pk, revision=version.revision
        )
        done += 1
    return done


def _revise(reviser: User) -> tuple[RubricVersion, dict[str, str]]:
    """The round the issue describes, on the first rubric waiting: two checks added (one in
    Arabic and Chinese), three texts edited (a fact, a list member, a meta-insight) and two
    checks re-tiered (an option, a step); completed. Returns the version and each changed
    text with its tier."""
    version = rubric_services.revision_claim(user=reviser)
    assert version is not None and version.stage == Stage.HUMAN_1

    def row(check_id: str):
        return version.checks.get(check_id=check_id)

    def step(action, **fields):
        version.refresh_from_db()
        action(user=reviser, version_id=version.pk, revision=version.revision, **fields)

    texts = {
        "The rocket lands upright on a drone ship (edited).": "answer_critical",
        "الصاروخ يهبط عموديًا 火箭垂直着陆": "valuable",
        'Its "form" is a tall white cylinder (edited).': "answer_critical",
        "How it is used follows from its reuse (edited).": "context",
        "Shown at launch, it steams (added).": "context",
    }
    step(rubric_services.check_edit_text, check_pk=row("I1").pk, text=list(texts)[0])
    step(
        rubric_services.check_add, text=list(texts)[1], tier="valuable", after_check_pk=row("I1").pk
    )
    step(rubric_services.check_edit_text, check_pk=row("I2.item1").pk, text=list(texts)[2])
    step(rubric_services.check_edit_text, check_pk=row("M1").pk, text=list(texts)[3])
    step(rubric_services.check_retier, check_pk=row("I3.opt2").pk, tier="answer_critical")
    step(rubric_services.check_retier, check_pk=row("I4.step1").pk, tier="context")
    step(rubric_services.check_add, text=list(texts)[4], tier="context")
    step(rubric_services.revision_complete)
    return version, texts


def test_every_stage_runs_to_its_end_on_the_demo_provider(demo):
    generate = launch_and_drain("generate", "--all")
    assert generate.items_total == 1  # the Hubble photo, its demo questions all discarded
    generated = Candidate.objects.filter(image__source_id="demo-hubble", origin=CandidateOrigin.LLM)
    assert generated.count() == 3 and all("demo" in c.text for c in generated)

    launch_and_drain("guard", "--all")  # the rocket: two annotators accepted its question
    rocket = FinalQuestion.objects.get(image__source_id="demo-rocket")

    launch_and_drain("build", "--all")
    draft = RubricVersion.objects.get(rubric__question=rocket, stage=Stage.LLM_DRAFT)
    assert draft.checks.count() >= 4 and draft.meta_rubric["snippets"]

    launch_and_drain("refine1", "--all")
    refined = RubricVersion.objects.get(rubric__question=rocket, stage=Stage.LLM_REFINED_1)
    assert {i["id"] for i in draft.meta_rubric["items"]} < {
        i["id"] for i in refined.meta_rubric["items"]
    }  # a verified superset

    dave = User.objects.get(username="dave")
    human, revised = _revise(dave)  # a round 1 with the changes of issue 21
    assert _human_round(dave) == 1  # and the other rubric's, as it stands
    launch_and_drain("refine2", "--all")
    assert RubricVersion.objects.filter(stage=Stage.LLM_REFINED_2).count() == 2
    # Refinement round 2 keeps every change of the human round (issue 21: it erased them).
    second = RubricVersion.objects.get(rubric=human.rubric, stage=Stage.LLM_REFINED_2)
    ops = sorted((h["op"], h["outcome"]) for h in second.human_changes)
    assert ops == [("add", "carried")] * 2 + [("edit", "carried")] * 3 + [("retier", "carried")] * 2
    texts = {c.text: c.tier for c in second.checks.all()}
    for text, tier in revised.items():
        assert any(text in said and at == tier for said, at in texts.items()), (text, tier)
    assert _human_round(User.objects.get(username="dave")) == 2  # human round 2, frozen

    launch_and_drain("collect", "--model", DEMO_EVALUATED_MODEL, "--setting", "multimodal")
    answers = Response.objects.filter(model__name=DEMO_EVALUATED_MODEL)
    assert answers.count() == 2 and all(a.text.startswith("Demo answer") for a in answers)

    launch_and_drain("judge", "--judge", DEMO_JUDGE, "--judge-models", DEMO_EVALUATED_MODEL)
    judge = Judge.objects.get(name=DEMO_JUDGE)
    verdicts = Verdict.objects.filter(judge=judge)
    assert verdicts.exists() and not verdicts.filter(verdict="failed").exists()
    board = leaderboard(judge=judge, setting="multimodal")
    assert [(row.model, row.scored) for row in board.rows if row.scored] == [
        (DEMO_EVALUATED_MODEL, 2)
    ]
    # Every call went to the demo provider, and the ledger says so.
    assert set(LedgerEntry.objects.values_list("provider", "model_version")) == {
        (Provider.DEMO, "demo")
    }
    assert set(LedgerEntry.objects.values_list("model", flat=True)) == {
        *DEMO_STAGE_MODELS.values(),
        "demo-answerer",
        "demo-judge-llm",
    }
    # The demo judge is not taken for the demo model's own judge (no self-preference).
    from judging.leaderboard.reports import _own_models

    assert DEMO_EVALUATED_MODEL not in _own_models([judge]).get(DEMO_JUDGE, [])


def test_load_demo_twice_keeps_the_llm_models_and_never_touches_the_settings(demo, settings):
    settings.LLM_MODEL_GENERATION = "gemini-real"
    before = list(LLMModel.objects.order_by("pk").values())
    call_command("load_demo", stdout=StringIO())
    assert list(LLMModel.objects.order_by("pk").values()) == before
    assert settings.LLM_MODEL_GENERATION == "gemini-real"
    # A real model named for a stage is what the stage calls: the demo is not chosen.
    with pytest.raises(CommandError, match="gemini-real"):
        call_command("launch_job", "generate", "--all", stdout=StringIO())


@pytest.fixture
def worker(demo):
    """A thread that stands in for the Celery worker: it drains every active job."""
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.is_set():
                for job in Job.objects.filter(status__in=jobs.ACTIVE):
                    drain(job)
                stop.wait(0.05)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    yield
    stop.set()
    thread.join()


def _wait(*args: str) -> str:
    out = StringIO()
    call_command("launch_job", *args, "--wait", "--poll", "0.05", "--progress", "never", stdout=out)
    return out.getvalue()


def test_production_never_falls_back_to_a_demo_model(demo, settings):
    settings.PRODUCTION = True
    for stage in ("generate", "build"):
        with pytest.raises(CommandError, match="No model is configured") as refused:
            call_command("launch_job", stage, "--all", stdout=StringIO())
        assert refused.value.returncode == 2


def test_wait_reports_the_job_and_exits_0_when_every_item_is_done(worker):
    out = _wait("generate", "--ids", "demo-hubble", "demo-chelsea")
    assert "2 done, 0 failed of 2" in out
    assert Candidate.objects.filter(origin=CandidateOrigin.LLM).count() == 6


def test_wait_lists_the_failed_items_and_exits_1(worker, settings):
    # A demo model named in production settings: the gateway refuses to call it, so each
    # item fails (and says why).
    settings.PRODUCTION = True
    settings.LLM_MODEL_GENERATION = "demo-generator"
    out = StringIO()
    with pytest.raises(CommandError) as failed:
        call_command(
            "launch_job",
            "generate",
            "--ids",
            "demo-hubble",
            "--wait",
            "--poll",
            "0.05",
            "--progress",
            "never",
            stdout=out,
        )
    assert failed.value.returncode == 1
    assert "1 item(s) failed" in str(failed.value)
    assert "failed demo-hubble:" in out.getvalue()
    assert "refused in production" in out.getvalue()
    assert not Candidate.objects.filter(origin=CandidateOrigin.LLM).exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["generate", "--ids", "no-such-image"],
            "Unknown for Generate candidates (A.1) (1): no-such-image",
        ),
        (["generate", "--domain", "nowhere"], "Unknown domain 'nowhere'"),
        (["build", "--state", "bogus"], "Unknown state 'bogus'"),
        (["generate", "--domain", "animals", "--ids", "demo-chelsea"], "one or the other"),
        (["generate", "--model", "x"], "--model is for the judging runs"),
        (["collect", "--model", DEMO_EVALUATED_MODEL], "collect needs --model NAME and --setting"),
        (
            ["collect", "--model", "demo-model-a", "--setting", "multimodal"],
            "no evaluated model 'demo-model-a' with an LLM model",
        ),
        (["judge", "--judge", "nobody"], "no judge 'nobody'"),
        (["judge", "--judge", DEMO_JUDGE, "--judge-settings", "sideways"], "unknown setting"),
        (
            ["collect", "--model", DEMO_EVALUATED_MODEL, "--setting", "multimodal", "--ids", "zzz"],
            "--ids: No final question for 1 source id(s): zzz",
        ),
        (["guard", "--user", "alice"], "'alice' is no admin"),
    ],
)
def test_bad_arguments_exit_2_naming_what_is_wrong(demo, args, message):
    with pytest.raises(CommandError) as refused:
        call_command("launch_job", *args, stdout=StringIO())
    assert refused.value.returncode == 2
    assert message in str(refused.value)
    assert not Job.objects.exists()


def test_estimate_only_prints_the_estimate_and_launches_nothing(demo):
    out = StringIO()
    call_command(
        "launch_job",
        "generate",
        "--ids",
        "demo-hubble",
        "demo-chelsea",
        "--estimate-only",
        stdout=out,
    )
    assert "Generate candidates (A.1): 2 images with demo-generator; 2-6 calls" in out.getvalue()
    assert not Job.objects.exists()


def test_a_filter_scope_from_the_command_line(demo):
    out = StringIO()
    call_command(
        "launch_job", "generate", "--domain", "places", "--state", "all_discarded", stdout=out
    )
    assert list(Job.objects.get().items.values_list("key", flat=True)) == ["demo-hubble"]


def test_fresh_reaches_the_job_and_its_calls(demo):
    first = launch_and_drain("generate", "--ids", "demo-chelsea")
    cached = launch_and_drain("generate", "--ids", "demo-chelsea")
    fresh = launch_and_drain("generate", "--ids", "demo-chelsea", "--fresh")
    assert [job.params["fresh"] for job in (first, cached, fresh)] == [False, False, True]
    # The same request each time: answered from the ledger, unless fresh calls were asked for.
    assert [
        LedgerEntry.objects.filter(job_id=job.pk).count() for job in (first, cached, fresh)
    ] == [1, 0, 1]


def test_the_pages_label_the_demo_models(demo, client):
    client.force_login(User.objects.get(username="admin"))
    estimate = client.post("/jobs/estimate/", {"launcher": "generate", "scope": "all"})
    assert 'data-testid="demo-model"' in estimate.content.decode()
    runs = client.get("/judging/runs/").content.decode()
    assert runs.count('<span class="badge demo">demo</span>') == 2  # the model and the judge
    judged = client.post(
        "/judging/runs/estimate/",
        {"what": "collect", "collect-model": demo_model_pk(), "collect-setting": "multimodal"},
    )
    assert 'data-testid="demo-model"' in judged.content.decode()


def demo_model_pk() -> int:
    from judging.models import EvaluatedModel

    return EvaluatedModel.objects.get(name=DEMO_EVALUATED_MODEL).pk
