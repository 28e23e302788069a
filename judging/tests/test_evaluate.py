"""Evaluating a model on a release in one run (issue 25, section 2): the plan and its clear
refusals, the estimate, the chained job (answers, then verdicts) through the real clients on
the fake server, a failure midway and the run again that continues where it stopped, the
result (row, interval, rank, paired differences), and `manage.py evaluate`."""

from __future__ import annotations

import hashlib
import json
import re
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from judging.leaderboard.comparisons import paired
from judging.models import EvaluatedModel, Judge, Response, ResponseTierCount, Verdict
from judging.releases.scores import release_board
from judging.releases.services import create_release
from judging.runs import evaluate as ev
from judging.runs import llm_jobs
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record
from llm.jobs import JobError
from llm.models import ItemStatus, Job, LLMModel
from llm.tasks import run_job_chunk
from llm.tests.conftest import Harness
from tests.fake_llm import FakeLLM, Recorded, Reply, fake_llm  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f00f0004850180848ca9210000000049454e44ae426082"
)
CHECK = re.compile(r"The check \(tier: [a-z ]+\):\n")
VERDICTS = ("meets", "partially_meets", "missing", "contradicts")


def llm(name: str, provider: str = "gemini", rpm: int = 0) -> LLMModel:
    model = "gemini-2.5-flash" if provider == "gemini" else "Qwen/Qwen3-VL-8B-Instruct"
    return LLMModel.objects.create(
        name=name,
        provider=provider,
        model=model,
        requests_per_minute=rpm,
        price_input_per_million=1,
        price_output_per_million=4,
    )


def parts(recorded: Recorded) -> list[dict]:
    if recorded.protocol.startswith("gemini"):
        return recorded.body["contents"][0]["parts"]
    return recorded.body["messages"][-1]["content"]


def is_judge_call(recorded: Recorded) -> bool:
    return bool(CHECK.match(parts(recorded)[-1].get("text", "")))


def responder(fail: set[str] | None = None):
    """Answers "Answer n" to an answer call, and to a judge call a verdict drawn from a hash
    of the whole prompt (so it varies by answer and check); a judge call whose prompt holds
    one of `fail` gets a server error."""
    answers = iter(range(1, 10_000))

    def respond(recorded: Recorded) -> Reply:
        if not is_judge_call(recorded):
            return Reply(text=f"Answer {next(answers)}: beef bourguignon, braised in wine.")
        prompt = json.dumps(parts(recorded))
        if fail and any(f in prompt for f in fail):
            return Reply.server_error()
        verdict = VERDICTS[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 4]
        return Reply(text=json.dumps({"verdict": verdict, "rationale": f"says {verdict}"}))

    return respond


@pytest.fixture
def harness(fake_llm: FakeLLM, monkeypatch, settings, tmp_path):  # noqa: F811
    monkeypatch.setattr(run_job_chunk, "delay_on_commit", lambda job_id: None)
    settings.MEDIA_ROOT = str(tmp_path)
    fake_llm.responder = responder()
    return Harness(fake_llm)


@pytest.fixture
def bench(harness, settings):
    """Six questions of three checks, cut as release v1.0; two models with imported answers in
    both settings, graded by a judge that calls the fake; a new model to evaluate."""
    questions = [make_question(f"q{i}") for i in range(1, 7)]
    for q in questions:
        path = Path(settings.MEDIA_ROOT) / q.image.file.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(PNG)
    judge = Judge.objects.create(name="judge-g", llm_model=llm("judge-llm", rpm=600))
    for m, model in enumerate(("model-a", "model-b")):
        evaluated = EvaluatedModel.objects.create(name=model)
        for setting in ("multimodal", "text_only"):
            for i, q in enumerate(questions):
                response = Response.objects.create(
                    model=evaluated, question=q, setting=setting, text=f"{model} on {i}"
                )
                for k, check in enumerate(final_checks(q)):
                    verdict_record(
                        judge=judge,
                        response=response,
                        check=check,
                        verdict=VERDICTS[(i + k + 2 * m) % 4 if k else m],
                    )
    release = create_release("v1.0")
    new = EvaluatedModel.objects.create(name="model-new", llm_model=llm("answerer", "openai"))
    return harness, release, judge, new


def drain(harness: Harness, job: Job) -> Job:
    harness.drain(job)
    return job


def answer_calls(fake: FakeLLM) -> int:
    return sum(not is_judge_call(r) for r in fake.requests)


def judge_calls(fake: FakeLLM) -> int:
    return sum(is_judge_call(r) for r in fake.requests)


# --- the plan's refusals ----------------------------------------------------------------------


def test_plan_refuses_what_it_cannot_run_and_says_where(bench):
    _, release, judge, new = bench

    def refused(**kwargs) -> ev.EvaluateError:
        args = {"model": "model-new", "release": "v1.0", **kwargs}
        with pytest.raises(ev.EvaluateError) as caught:
            ev.evaluate_plan(**args)
        return caught.value

    e = refused(model="nobody")
    assert e.field == "model" and "No evaluated model is named 'nobody'" in e.message
    assert "model-new" in e.message  # the known ones are named
    e = refused(release="v9")
    assert e.field == "release" and "No release is named 'v9' (releases: v1.0)" in e.message
    e = refused(settings=["sideways"])
    assert e.field == "settings" and "multimodal or text_only" in e.message
    e = refused(judges=["nobody"])
    assert e.field == "judges" and "No judge is named 'nobody'" in e.message
    Judge.objects.create(name="fresh-judge", llm_model=LLMModel.objects.get(name="judge-llm"))
    e = refused(judges=["fresh-judge"])
    assert e.field == "judges" and "fresh-judge never scored release v1.0" in e.message
    assert "judge-g" in e.message
    # A judge whose verdicts are imported cannot grade the new answers.
    Judge.objects.filter(pk=judge.pk).update(llm_model=None)
    e = refused(judges=["judge-g"])
    assert e.field == "judges" and "calls no model" in e.message
    e = refused()
    assert e.field == "judges" and "No judge that scored release v1.0 calls a model" in e.message


def test_plan_defaults_to_both_settings_and_the_judges_that_scored_the_release(bench):
    _, release, judge, new = bench
    Judge.objects.create(name="never", llm_model=LLMModel.objects.get(name="judge-llm"))
    imported = Judge.objects.create(name="imported-judge")
    response = Response.objects.filter(model__name="model-a").first()
    verdict_record(
        judge=imported, response=response, check=final_checks(response.question)[0], verdict="meets"
    )
    plan = ev.evaluate_plan(model="model-new", release="v1.0")
    assert plan.settings == ["multimodal", "text_only"]
    assert [j.name for j in plan.judges] == ["judge-g"]
    assert plan.left_out == ["imported-judge"]
    assert ev.evaluate_plan(model="model-new", release="v1.0", settings=["text_only"]).settings == [
        "text_only"
    ]


def test_a_model_that_calls_nothing_is_refused_only_when_answers_are_missing(bench):
    EvaluatedModel.objects.filter(name="model-new").update(llm_model=None)
    plan = ev.evaluate_plan(model="model-new", release="v1.0")
    with pytest.raises(ev.EvaluateError, match="lacks 6 answer") as caught:
        ev.evaluate_estimate(plan)
    assert caught.value.field == "model"


# --- the estimate -----------------------------------------------------------------------------


def test_estimate_counts_each_step_and_the_time_at_the_quotas(bench):
    harness, release, judge, new = bench
    plan = ev.evaluate_plan(model="model-new", release="v1.0")
    est = ev.evaluate_estimate(plan)
    assert est.items == 12  # 6 questions x 2 settings
    assert [(s.step, s.who, s.setting, s.responses, s.calls) for s in est.steps] == [
        ("collect", "model-new", "multimodal", 6, 6),
        ("judge", "judge-g", "multimodal", 6, 18),
        ("collect", "model-new", "text_only", 6, 6),
        ("judge", "judge-g", "text_only", 6, 18),
    ]
    assert est.calls == 48
    assert est.cost == sum(s.cost for s in est.steps) > 0
    # The judge's 36 calls at 600 a minute take 3.6 s; the answerer has no limit.
    quotas = {q.model: q for q in est.quotas}
    assert quotas["judge-llm"].seconds == pytest.approx(3.6)
    assert quotas["answerer"].seconds is None
    assert est.seconds == pytest.approx(3.6)
    assert "No per-minute limit is set for answerer" in est.note
    assert Job.objects.count() == 0 and harness.fake.requests == []


# --- the run ----------------------------------------------------------------------------------


def test_a_run_answers_then_judges_and_ends_with_the_row_rank_and_neighbours(bench):
    harness, release, judge, new = bench
    plan = ev.evaluate_plan(model="model-new", release="v1.0")
    job = drain(harness, ev.evaluate_launch(user=None, plan=plan))

    assert (job.kind, job.status, job.items_done, job.items_failed) == (
        llm_jobs.EVALUATE,
        "done",
        12,
        0,
    )
    assert (answer_calls(harness.fake), judge_calls(harness.fake)) == (12, 36)
    assert Response.objects.filter(model=new).count() == 12
    assert Verdict.objects.filter(judge=judge, response__model=new).count() == 36
    assert [(s.done, s.total) for s in ev.evaluate_progress(plan)] == [(12, 12), (12, 12)]
    item = job.items.order_by("key").first()
    assert item.key == "multimodal/q1"
    assert item.result["collected"] is True and item.result["judges"]["judge-g"]["calls"] == 3

    results = ev.evaluate_result(plan)
    assert [(r.setting, r.judge) for r in results] == [
        ("multimodal", "judge-g"),
        ("text_only", "judge-g"),
    ]
    for result in results:
        board = release_board(release, judge=judge, setting=result.setting, estimate=False).board
        row = board.rows[result.rank - 1]
        assert row.model == "model-new" and result.row.gamut == row.gamut
        assert result.row.low <= result.row.gamut <= result.row.high
        assert (result.row.scored, result.ranked) == (6, 3)
        assert result.audited is None  # no human audit yet
        ranks = [n.rank for n in result.neighbours]
        assert ranks == [r for r in (result.rank - 1, result.rank + 1) if 1 <= r <= 3]
        for n in result.neighbours:
            # the model minus its neighbour, on the questions both were scored on
            expected = paired(
                "model-new", n.model, board.scores["model-new"], board.scores[n.model]
            )
            assert (n.difference, n.low, n.high, n.questions) == pytest.approx(
                (expected.difference, expected.low, expected.high, expected.n)
            )
        assert ev.result_dict(result)["rank"] == result.rank

    # Nothing left: neither estimated nor launched again.
    with pytest.raises(JobError, match="nothing to do"):
        ev.evaluate_estimate(plan)
    with pytest.raises(JobError, match="nothing to do"):
        ev.evaluate_launch(user=None, plan=plan)


def test_a_failure_midway_keeps_what_was_done_and_a_run_again_calls_only_the_rest(bench):
    harness, release, judge, new = bench
    # The judge's provider fails every call about the second check (for good: the gateway's
    # retries too): the answers are in, two checks of three judged, the items failed.
    harness.fake.responder = responder(fail={"check 1"})
    plan = ev.evaluate_plan(model="model-new", release="v1.0", settings=["text_only"])
    first = drain(harness, ev.evaluate_launch(user=None, plan=plan))
    assert (first.items_done, first.items_failed) == (0, 6)
    assert "judge judge-g: 1 of 3 checks got no verdict" in first.items.first().last_error
    assert answer_calls(harness.fake) == 6
    assert Response.objects.filter(model=new).count() == 6
    done = Verdict.objects.filter(judge=judge, response__model=new).exclude(verdict="failed")
    assert done.count() == 12
    assert [(s.done, s.total) for s in ev.evaluate_progress(plan)] == [(6, 6), (0, 6)]
    row = ev.evaluate_result(plan)[0].row
    assert (row.scored, row.failed) == (0, 6)  # never scored as 0

    # Fixed; the run again asks for the six failed checks only: no answer, no check twice.
    harness.fake.responder = responder()
    harness.fake.requests.clear()
    est = ev.evaluate_estimate(plan)
    assert (est.items, [s.step for s in est.steps], est.calls) == (6, ["judge"], 6)
    second = drain(harness, ev.evaluate_launch(user=None, plan=plan))
    assert (second.items_done, second.items_failed) == (6, 0)
    assert (answer_calls(harness.fake), judge_calls(harness.fake)) == (0, 6)
    assert all(not i.result["collected"] for i in second.items.all())
    assert {i.result["judges"]["judge-g"]["already"] for i in second.items.all()} == {2}
    result = ev.evaluate_result(plan)[0]
    assert result.row.scored == 6 and result.rank is not None


def test_a_step_killed_midway_is_continued_by_the_next_chunk_without_a_call_twice(bench):
    """A worker dies inside an item, after its answer and verdicts were paid for but before
    the item was recorded: the item's lease runs out, the next chunk runs it again, and the
    response, the verdicts and the ledger's cache answer it without a call."""
    from django.utils import timezone

    from llm import jobs
    from llm.models import JobItem

    harness, release, judge, new = bench
    plan = ev.evaluate_plan(model="model-new", release="v1.0", settings=["multimodal"])
    job = ev.evaluate_launch(user=None, plan=plan)
    # The first chunk claims the items and "dies": it never records an outcome.
    claim = jobs.item_claim_chunk(job_id=job.pk)
    assert claim is not None and len(claim.items) == 6
    # The work it did before dying (answers and verdicts, each stored as it came), done here
    # by a job of the same items that then completes.
    other = drain(harness, ev.evaluate_launch(user=None, plan=plan))
    assert other.items_done == 6
    calls = len(harness.fake.requests)
    assert calls == 6 + 18
    JobItem.objects.filter(job=job).update(lease_until=timezone.now())  # the lease ran out
    drain(harness, job)
    assert (job.status, job.items_done) == ("done", 6)
    assert len(harness.fake.requests) == calls  # nothing asked twice
    assert ResponseTierCount.objects.filter(response__model=new).count() == 18


def test_judges_are_asked_in_parallel_per_item_and_each_keeps_its_verdicts(bench):
    harness, release, judge, new = bench
    second = Judge.objects.create(name="judge-q", llm_model=llm("judge-q-llm", "openai"))
    for response in Response.objects.filter(model__name__in=["model-a", "model-b"]):
        for check in final_checks(response.question):
            verdict_record(judge=second, response=response, check=check, verdict="meets")

    # judge-q's provider fails for good: judge-g's verdicts stay.
    def respond(recorded: Recorded) -> Reply:
        if recorded.protocol.startswith("openai") and is_judge_call(recorded):
            return Reply.server_error()
        return responder()(recorded)

    harness.fake.responder = respond
    plan = ev.evaluate_plan(model="model-new", release="v1.0", settings=["multimodal"])
    assert [j.name for j in plan.judges] == ["judge-g", "judge-q"]
    job = drain(harness, ev.evaluate_launch(user=None, plan=plan))
    assert job.items_failed == 6
    assert "judge judge-q: 3 of 3 checks got no verdict" in job.items.first().last_error
    assert Verdict.objects.filter(judge=judge, response__model=new).count() == 18
    assert job.items.filter(status=ItemStatus.FAILED).count() == 6


# --- the command ------------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command("evaluate", *args, stdout=out)
    return out.getvalue()


def test_command_estimate_only_launches_nothing(bench):
    harness, *_ = bench
    out = run("model-new", "--release", "v1.0", "--estimate-only")
    assert "Evaluate model-new on release v1.0 (multimodal, text-only; judges: judge-g)" in out
    assert "12 item(s), at most 48 calls" in out
    assert "time at the models' quotas: about 4 s" in out
    assert "judge-llm: 36 calls at 600 requests/min: about 4 s" in out
    assert Job.objects.count() == 0 and harness.fake.requests == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody", "--release", "v1.0"], "No evaluated model is named 'nobody'"),
        (["model-new", "--release", "v9"], "No release is named 'v9'"),
        (["model-new", "--release", "v1.0", "--judge", "nobody"], "No judge is named 'nobody'"),
    ],
)
def test_command_refuses_with_a_clear_error(bench, args, message):
    with pytest.raises(CommandError, match=re.escape(message)) as caught:
        run(*args)
    assert caught.value.returncode == 2
    assert Job.objects.count() == 0


def test_command_with_nothing_left_prints_the_result(bench):
    harness, release, judge, new = bench
    plan = ev.evaluate_plan(model="model-new", release="v1.0", settings=["text_only"])
    drain(harness, ev.evaluate_launch(user=None, plan=plan))
    out = run("model-new", "--release", "v1.0", "--setting", "text_only")
    assert "nothing to do" in out
    result = ev.evaluate_result(plan)[0]
    assert f"rank {result.rank} of 3; 6 of 6 questions scored" in out
    assert "corrected by the human audit: no audit of this judge and setting yet" in out
    assert out.count("    vs model-") == len(result.neighbours)
    assert np.isfinite(result.row.gamut)
