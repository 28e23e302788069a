"""Scores corrected by the audit (judging/leaderboard/ppi.py): a hand-computed case, ppi_py's own
results on the same samples, and the interval's coverage on generated data with a lenient judge."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from judging.leaderboard.ppi import (
    VERDICT_INDEX,
    AuditedQuestion,
    corrected,
    from_counts,
    labelled,
    predicted_width,
    question_counts,
    rectifier_spread,
)
from judging.verdicts.scoring import DEFAULT_SETTINGS, TIERS, response_score, tier_score

Q1 = AuditedQuestion(
    judge={1: ("answer_critical", "meets"), 2: ("valuable", "meets")},
    people={2: "missing"},
)
Q2 = AuditedQuestion(
    judge={
        3: ("answer_critical", "meets"),
        4: ("valuable", "missing"),
        5: ("context", "meets"),
    },
    people={3: "partially_meets"},
)


def test_the_labelled_samples_by_hand():
    y, yhat, w, pairs = labelled([Q1, Q2], DEFAULT_SETTINGS)
    # Q1: judge 1; with people's "missing" on the valuable check (0.6*1 + 0.3*0) / 0.9 = 2/3,
    # an error of -1/3 on 1 check of 2, scaled by 2: Y = 1 - 2/3.
    # Q2: judge (0.6 + 0 + 0.1) / 1 = 0.7; people's "partially" on the answer-critical check:
    # 0.3 + 0.1 = 0.4, an error of -0.3 on 1 check of 3, scaled by 3: Y = 0.7 - 0.9.
    assert y == pytest.approx([1 / 3, -0.2])
    assert yhat == pytest.approx([1, 0.7])
    assert w == pytest.approx([1 / 2, 1 / 3])
    assert pairs == 2
    # The valuable tier alone: only Q1 has an audited valuable check; Q2's is not audited.
    y, yhat, w, pairs = labelled([Q1, Q2], DEFAULT_SETTINGS, "valuable")
    assert (y.tolist(), yhat.tolist(), w.tolist(), pairs) == ([0.0], [1.0], [1.0], 1)


def test_plain_ppi_by_hand_and_power_tuned_as_ppi_py_gives_it():
    unlabelled = np.array([1.0, 0.7, 0.5])
    y, yhat, w = np.array([1 / 3, -0.2]), np.array([1.0, 0.7]), np.array([1 / 2, 1 / 3])
    # lambda = 1: mean judge score 0.7333 + weighted mean error; weights to mean 1 are 1.2, 0.8:
    # (1.2 * -2/3 + 0.8 * -0.9) / 2 = -0.76.
    plain = ppi_mean_pointestimate(y, yhat, unlabelled, lam=1, w=w)
    assert float(np.ravel(plain)[0]) == pytest.approx(2.2 / 3 - 0.76)
    result = corrected(unlabelled, [Q1, Q2], DEFAULT_SETTINGS)
    estimate = ppi_mean_pointestimate(y, yhat, unlabelled, w=w)
    low, high = ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, w=w)
    assert result.estimate == pytest.approx(float(np.ravel(estimate)[0]))
    assert (result.low, result.high) == pytest.approx((float(low[0]), float(high[0])))
    assert (result.pairs, result.questions) == (2, 2)
    assert result.low < result.estimate < result.high


def test_a_judge_people_agree_with_is_not_moved_and_one_question_gives_no_interval():
    same = [
        AuditedQuestion(judge={c: ("valuable", v)}, people={c: v})
        for c, v in enumerate(["meets", "missing", "partially_meets", "meets"])
    ]
    scores = np.array([1.0, 0.0, 0.5, 1.0, 0.25, 0.75])
    result = corrected(scores, same, DEFAULT_SETTINGS)
    # No error to correct: plain PPI (lambda = 1) would be the judge's mean; PPI++ tunes
    # lambda below 1 (about 1 / (1 + n / N)) and so leans a little, never past it, towards the
    # audited questions' mean, 0.625.
    assert scores.mean() < result.estimate < 0.625
    assert result.low < scores.mean() < result.high
    alone = corrected(scores, same[:1], DEFAULT_SETTINGS)
    assert (alone.estimate, alone.low, alone.pairs, alone.questions) == (None, None, 1, 1)


def _world(rng: random.Random, questions: int = 300):
    """Questions of 2 to 7 checks; people's verdicts; a lenient judge that calls 30% of the
    missing checks met. No contradicts: the score is then linear in the verdicts."""
    world = []
    for q in range(questions):
        n = rng.randint(2, 7)
        tiers = [TIERS[i % 3] for i in range(n)]
        people = [rng.choice(["meets", "missing", "missing", "partially_meets"]) for _ in tiers]
        judge = ["meets" if v == "missing" and rng.random() < 0.3 else v for v in people]
        world.append((q, tiers, people, judge))
    return world


def _gamut(tiers, verdicts) -> float:
    counts: dict = {}
    for t, v in zip(tiers, verdicts, strict=True):
        counts.setdefault(t, {}).setdefault(v, 0)
        counts[t][v] += 1
    return response_score(counts, DEFAULT_SETTINGS).gamut


def test_the_corrected_interval_covers_people_s_score_and_removes_the_judge_s_lean():
    rng = random.Random(7)
    covered, errors, judge_errors, trials = 0, [], [], 60
    for _ in range(trials):
        world = _world(rng)
        truth = np.mean([_gamut(t, p) for _, t, p, _ in world])
        judge_scores = np.array([_gamut(t, j) for _, t, _, j in world])
        pairs = [(q, c) for q, tiers, _, _ in world for c in range(len(tiers))]
        audited: dict[int, set[int]] = {}
        for q, c in rng.sample(pairs, 150):
            audited.setdefault(q, set()).add(c)
        sample = [
            AuditedQuestion(
                judge={c: (tiers[c], judge[c]) for c in range(len(tiers))},
                people={c: people[c] for c in audited[q]},
            )
            for q, tiers, people, judge in world
            if q in audited
        ]
        result = corrected(judge_scores, sample, DEFAULT_SETTINGS)
        covered += result.low <= truth <= result.high
        errors.append(result.estimate - truth)
        judge_errors.append(judge_scores.mean() - truth)
    assert np.mean(judge_errors) > 0.05  # the judge is lenient
    assert abs(np.mean(errors)) < 0.015  # the correction is not
    assert covered / trials >= 0.88  # a 95% interval, with room for 60 trials


def test_a_tier_is_corrected_over_its_own_checks():
    q = AuditedQuestion(
        judge={1: ("context", "meets"), 2: ("context", "meets"), 3: ("valuable", "missing")},
        people={1: "missing"},
    )
    y, yhat, _, _ = labelled([q], DEFAULT_SETTINGS, "context")
    # The context tier: 1 of its 2 checks audited, the error -0.5 scaled by 2.
    assert yhat.tolist() == [tier_score({"meets": 2})]
    assert y.tolist() == [0.0]


def test_the_rectifier_spread_and_the_predicted_width():
    # Q1, Q2: Y - Yhat = -2/3 and -0.9, weights to mean 1 are 1.2 and 0.8: -0.8 and -0.72.
    spread = rectifier_spread(question_counts([Q1, Q2]), DEFAULT_SETTINGS)
    assert spread == pytest.approx(2 * 0.04**2)
    assert math.isnan(rectifier_spread(question_counts([Q1]), DEFAULT_SETTINGS))
    assert predicted_width(0.25, 100) == pytest.approx(100 * 2 * 1.959964 * 0.05)
    assert predicted_width(0.25, 0) is None


def test_the_leaderboard_s_counts_give_the_same_samples_as_the_verdicts():
    """The leaderboard builds the audited questions from its own counts and the audited pairs
    only (from_counts); the same questions from every verdict give the same arrays."""
    judge = np.zeros((2, 3, 4))
    judge[0, 0, 0] = judge[0, 1, 0] = 1  # Q1: meets, meets
    judge[1, 0, 0] = judge[1, 1, 2] = judge[1, 2, 0] = 1  # Q2: meets, missing, meets
    pairs = [(0, 1, VERDICT_INDEX["meets"], VERDICT_INDEX["missing"])]
    pairs.append((1, 0, VERDICT_INDEX["meets"], VERDICT_INDEX["partially_meets"]))
    for a, b in zip(from_counts(judge, pairs), question_counts([Q1, Q2]), strict=True):
        assert a.tolist() == b.tolist()
