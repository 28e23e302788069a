"""Verdict recording and its counts, and the leaderboard checked against an independent
computation straight from the Verdict rows."""

import random

import numpy as np
import pytest
from django.utils import timezone

from judging.leaderboard.board import bootstrap_interval, bootstrap_intervals, leaderboard
from judging.models import Judge, ResponseTierCount, Verdict
from judging.tests.conftest import add_checks, final_checks, make_question
from judging.verdicts.services import (
    JudgingError,
    judge_inputs,
    verdict_find,
    verdict_key,
    verdict_record,
)
from rubrics.models import RubricVersion

pytestmark = pytest.mark.django_db


def _counts(judge, response):
    return {
        (r.version_id, r.tier): (r.meets, r.partially, r.missing, r.contradicts, r.failed)
        for r in ResponseTierCount.objects.filter(judge=judge, response=response)
    }


def test_recording_counts_and_is_idempotent(judge, respond):
    question = make_question("q1", tiers=("answer_critical", "answer_critical", "valuable"))
    response = respond(question)
    c0, c1, c2 = final_checks(question)
    version = c0.version_id
    verdict_record(judge=judge, response=response, check=c0, verdict="meets")
    verdict_record(judge=judge, response=response, check=c1, verdict="contradicts")
    verdict_record(judge=judge, response=response, check=c2, verdict="partially_meets")
    expected = {
        (version, "answer_critical"): (1, 0, 0, 1, 0),
        (version, "valuable"): (0, 1, 0, 0, 0),
    }
    assert _counts(judge, response) == expected
    # the same key again, even with another verdict: nothing changes
    again = verdict_record(judge=judge, response=response, check=c0, verdict="missing")
    assert again.verdict == "meets"
    assert Verdict.objects.count() == 3
    assert _counts(judge, response) == expected


def test_failed_verdict_is_replaced_by_a_retry(judge, respond):
    question = make_question("q1", tiers=("answer_critical",))
    response = respond(question)
    (check,) = final_checks(question)
    verdict_record(judge=judge, response=response, check=check, verdict="failed")
    assert _counts(judge, response) == {(check.version_id, "answer_critical"): (0, 0, 0, 0, 1)}
    verdict_record(judge=judge, response=response, check=check, verdict="meets")
    assert _counts(judge, response) == {(check.version_id, "answer_critical"): (1, 0, 0, 0, 0)}
    assert Verdict.objects.get().verdict == "meets"


def test_refusals(judge, respond):
    question = make_question("q1", tiers=("answer_critical",))
    other = make_question("q2", tiers=("answer_critical",))
    response = respond(question)
    (check,) = final_checks(question)
    with pytest.raises(JudgingError, match="unknown verdict"):
        verdict_record(judge=judge, response=response, check=check, verdict="great")
    with pytest.raises(JudgingError, match="another question"):
        verdict_record(
            judge=judge, response=response, check=final_checks(other)[0], verdict="meets"
        )
    draft = RubricVersion.objects.create(rubric=question.rubric, stage="human_1", meta_rubric={})
    (draft_check,) = add_checks(draft, ("answer_critical",))
    with pytest.raises(JudgingError, match="draft"):
        verdict_record(judge=judge, response=response, check=draft_check, verdict="meets")
    assert not Verdict.objects.exists() and not ResponseTierCount.objects.exists()


def test_key_and_reuse_across_versions(judge, respond):
    question = make_question("q1", tiers=("answer_critical",))
    response = respond(question)
    (old,) = final_checks(question)
    verdict_record(
        judge=judge, response=response, check=old, verdict="meets", template_version="t1"
    )
    inputs = judge_inputs(response=response, tier=old.tier, check_text=old.text)
    key = verdict_key(judge=judge, template_version="t1", inputs=inputs)
    assert verdict_find(judge=judge, key=key).check_row == old
    assert verdict_key(judge=judge, template_version="t2", inputs=inputs) != key


# --- the leaderboard ------------------------------------------------------------------------

LAMBDA, MU, WEIGHTS = 0.5, -2.0, {"answer_critical": 0.6, "valuable": 0.3, "context": 0.1}
VALUE = {"meets": 1.0, "partially_meets": LAMBDA, "missing": 0.0, "contradicts": MU}


def independent(judge, setting):
    """The leaderboard's numbers from the Verdict rows, with the spec's formulas written out."""
    from annotation.models import FinalQuestion
    from judging.models import EvaluatedModel, Response

    out = {}
    questions = list(FinalQuestion.objects.filter(dropped_at__isnull=True))
    for model in EvaluatedModel.objects.all():
        responses = {
            r.question_id: r for r in Response.objects.filter(model=model, setting=setting)
        }
        if not responses:
            continue
        gammas, tier_values, missing, failed = [], {}, 0, 0
        for q in questions:
            if q.id not in responses:
                missing += 1
                continue
            final = max(v.id for v in q.rubric.versions.all() if v.frozen_at)
            verdicts = [
                v
                for v in Verdict.objects.filter(judge=judge, response=responses[q.id])
                if v.check_row.version_id == final
            ]
            if any(v.verdict == "failed" for v in verdicts):
                failed += 1
                continue
            by_tier = {}
            for v in verdicts:
                by_tier.setdefault(v.check_row.tier, []).append(v.verdict)
            scores = {}
            for tier, vs in by_tier.items():
                num = sum(VALUE[v] for v in vs)
                den = sum(abs(MU) if v == "contradicts" else 1 for v in vs)
                scores[tier] = num / den
                tier_values.setdefault(tier, []).append(num / den)
            gammas.append(
                sum(WEIGHTS[t] * s for t, s in scores.items()) / sum(WEIGHTS[t] for t in scores)
            )
        out[model.name] = {
            "gamut": 100 * sum(gammas) / len(gammas) if gammas else None,
            "tiers": {t: 100 * sum(v) / len(v) for t, v in tier_values.items()},
            "scored": len(gammas),
            "missing": missing,
            "failed": failed,
        }
    return out


@pytest.fixture
def results(judge, respond):
    """3 models x 8 questions, random verdicts; one model misses a question, one verdict
    failed, one question dropped, one rubric edited after judging (a new frozen version with
    one check changed and one deleted)."""
    rng = random.Random(7)
    tier_sets = [
        ("answer_critical", "valuable", "context"),
        ("answer_critical", "valuable"),
        ("answer_critical", "answer_critical", "context"),
    ]
    questions = [
        make_question(
            f"q{i}",
            domain=["food", "art"][i % 2],
            popularity=["head", "torso", "tail", "unknown"][i % 4],
            tiers=tier_sets[i % 3],
        )
        for i in range(8)
    ]
    verdicts = ["meets", "partially_meets", "missing", "contradicts"]
    responses = []
    for name in ("model-a", "model-b", "model-c"):
        for q in questions:
            if name == "model-c" and q.image.source_id == "q3":
                continue  # missing
            responses.append(respond(q, model=name))
            respond(q, model=name, setting="text_only")
    for response in responses:
        for check in final_checks(response.question):
            verdict_record(
                judge=judge, response=response, check=check, verdict=rng.choice(verdicts)
            )
    first = responses[0]
    Verdict.objects.filter(response=first).delete()
    ResponseTierCount.objects.filter(response=first).delete()
    for i, check in enumerate(final_checks(first.question)):
        verdict_record(
            judge=judge, response=first, check=check, verdict="failed" if i == 0 else "meets"
        )
    # q1 is edited: its new final version has check 0 reworded, check 1 deleted
    edited = questions[1]
    new = RubricVersion.objects.create(
        rubric=edited.rubric, stage="human_1", meta_rubric={}, frozen_at=timezone.now()
    )
    checks = add_checks(new, tier_sets[1], texts={0: "check 0, reworded"})
    checks[1].deleted_at = timezone.now()
    checks[1].save()
    for response in responses:
        if response.question_id == edited.id:
            verdict_record(judge=judge, response=response, check=checks[0], verdict="meets")
    questions[5].dropped_at = timezone.now()
    questions[5].save()
    return questions


def test_leaderboard_matches_independent_computation(judge, results):
    board = leaderboard(judge=judge, setting="multimodal")
    expected = independent(judge, "multimodal")
    assert {r.model for r in board.rows} == set(expected)
    assert board.questions == 7
    for row in board.rows:
        want = expected[row.model]
        assert row.gamut == pytest.approx(want["gamut"])
        for tier in ("answer_critical", "valuable", "context"):
            assert row.tiers[tier] == pytest.approx(want["tiers"].get(tier))
        assert (row.scored, row.missing, row.failed, row.pending) == (
            want["scored"],
            want["missing"],
            want["failed"],
            0,
        )
        assert row.low <= row.gamut <= row.high
    c = next(r for r in board.rows if r.model == "model-c")
    assert c.missing == 1
    a = next(r for r in board.rows if r.model == "model-a")
    assert a.failed == 1
    assert all(r.by_domain["art"].questions == 3 for r in board.rows)
    assert (
        sum(r.by_popularity[p].questions for p in board.popularities for r in board.rows) == 3 * 7
    )
    # Popularity unknown (a dataset import without it) is a column of its own.
    assert board.popularities == ["head", "torso", "tail", "unknown"]
    assert all(r.by_popularity["unknown"].questions == 2 for r in board.rows)  # q3, q7


def test_text_only_has_responses_but_no_verdicts_so_all_pending(judge, results):
    board = leaderboard(judge=judge, setting="text_only")
    a = next(r for r in board.rows if r.model == "model-a")
    assert (a.scored, a.pending, a.gamut, a.low) == (0, 7, None, None)


def test_other_judge_sees_nothing_scored(results):
    other = Judge.objects.create(name="other")
    board = leaderboard(judge=other, setting="multimodal")
    assert all(r.scored == 0 for r in board.rows)


def test_bootstrap_is_reproducible_and_contains_the_mean():
    values = [random.Random(i).uniform(-1, 1) for i in range(40)]
    low, high = bootstrap_interval(values)
    assert (low, high) == bootstrap_interval(values)
    assert low < sum(values) / len(values) < high
    assert bootstrap_interval([0.5]) == (None, None)  # one question: no interval (n too small)
    assert bootstrap_interval([]) == (None, None)


def test_the_migration_gives_old_verdicts_the_key_of_everything_the_judge_saw(judge, respond):
    from importlib import import_module

    from django.apps import apps

    question = make_question("q1", tiers=("answer_critical",))
    response = respond(question)
    (check,) = final_checks(question)
    row = verdict_record(
        judge=judge, response=response, check=check, verdict="meets", template_version="t1"
    )
    Verdict.objects.filter(pk=row.pk).update(key="an old key of judge, check and response")
    import_module("judging.migrations.0003_verdict_keys_hold_every_judge_input").rekey(apps, None)
    inputs = judge_inputs(response=response, tier=check.tier, check_text=check.text)
    assert Verdict.objects.get(pk=row.pk).key == verdict_key(
        judge=judge, template_version="t1", inputs=inputs
    )


def test_bootstrap_of_many_models_resamples_the_same_questions_for_each():
    """The matrix form draws what the definition draws: the rows of
    default_rng(seed).integers(0, n, (resamples, n)) over the n questions, and each model's
    mean over the drawn questions it has a score for; a model scored on every question gets
    the plain bootstrap of its values; one scored on none gets no interval."""
    rng = random.Random(7)
    n = 30
    scores = np.array([[rng.uniform(-1, 1) for _ in range(n)] for _ in range(3)])
    scores[1, ::3] = np.nan  # scored on two questions in three
    scores = np.vstack([scores, np.full(n, np.nan)])
    got = bootstrap_intervals(scores, resamples=400, seed=11)
    draws = np.random.default_rng(11).integers(0, n, size=(400, n))
    for row, interval in zip(scores[:3], got, strict=False):
        means = np.nanmean(row[draws], axis=1)
        want = np.percentile(means[~np.isnan(means)], [2.5, 97.5])
        assert interval == pytest.approx(tuple(want), abs=1e-12)
    assert got[0] == pytest.approx(bootstrap_interval(scores[0], resamples=400, seed=11))
    assert got[0] != got[2]  # different values, different intervals
    assert got[3] == (None, None)
