"""Properties of the scores over generated verdicts and settings (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from judging.verdicts.scoring import (
    TIERS,
    VERDICTS,
    ScoringSettings,
    VerdictCounts,
    model_score,
    response_score,
    tier_score,
)

FAST = settings(max_examples=150, deadline=None)
EPS = 1e-12

lambdas = st.floats(min_value=0.01, max_value=0.99)
mus = st.floats(min_value=-10, max_value=-0.01)
weights = st.tuples(*[st.floats(min_value=0, max_value=1)] * 3).filter(
    lambda w: min(w[0], w[1], w[2]) > 0 or sum(w) > 0.01
)
scoring = st.builds(ScoringSettings, lambdas, mus, weights)
positive_weights = st.builds(
    ScoringSettings, lambdas, mus, st.tuples(*[st.floats(min_value=0.01, max_value=1)] * 3)
)
# mu <= -1: a contradiction counts as at least one check, as the method text says; with
# -1 < mu < 0 the property below does not hold (see test_scoring.py).
heavy_mu = st.builds(ScoringSettings, lambdas, st.floats(min_value=-10, max_value=-1), weights)

counts = st.builds(VerdictCounts, *[st.integers(0, 20)] * 4).filter(lambda c: c.total > 0)
verdict_lists = st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=40)
responses = st.dictionaries(st.sampled_from(TIERS), counts, min_size=1)


@FAST
@given(counts, scoring)
def test_tier_score_lies_in_minus_one_to_one(c, s):
    assert -1 <= tier_score(c, s) <= 1


@FAST
@given(responses, positive_weights)
def test_gamut_lies_between_its_lowest_and_highest_tier_score(by_tier, s):
    score = response_score(by_tier, s)
    assert set(score.tiers) == set(by_tier)
    assert min(score.tiers.values()) - EPS <= score.gamut <= max(score.tiers.values()) + EPS
    assert -1 <= score.gamut <= 1


@FAST
@given(st.integers(1, 50), st.integers(1, 50), scoring)
def test_all_meets_is_one_and_all_contradicts_is_minus_one(m, c, s):
    assert tier_score(VerdictCounts(meets=m), s) == 1
    assert tier_score(VerdictCounts(contradicts=c), s) == -1
    tiers = {tier: VerdictCounts(meets=m) for tier in TIERS}
    assert response_score(tiers, s).gamut == 1
    tiers = {tier: VerdictCounts(contradicts=c) for tier in TIERS}
    assert response_score(tiers, s).gamut == -1


@FAST
@given(counts, scoring)
def test_adding_a_meets_never_lowers_a_tier_score(c, s):
    assert tier_score(replace(c, meets=c.meets + 1), s) >= tier_score(c, s) - EPS


@FAST
@given(counts, heavy_mu)
def test_replacing_a_missing_by_a_contradicts_never_raises_a_tier_score(c, s):
    if c.missing:
        worse = replace(c, missing=c.missing - 1, contradicts=c.contradicts + 1)
        assert tier_score(worse, s) <= tier_score(c, s) + EPS


@FAST
@given(st.data(), positive_weights)
def test_order_of_verdicts_and_of_tiers_does_not_matter(data, s):
    by_tier = {
        tier: data.draw(verdict_lists)
        for tier in data.draw(st.lists(st.sampled_from(TIERS), min_size=1, unique=True))
    }
    shuffled = {
        tier: data.draw(st.permutations(by_tier[tier]))
        for tier in data.draw(st.permutations(list(by_tier)))
    }
    first = response_score({t: VerdictCounts.of(v) for t, v in by_tier.items()}, s)
    second = response_score({t: VerdictCounts.of(v) for t, v in shuffled.items()}, s)
    assert first == second


@FAST
@given(st.lists(responses, min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_model_score_is_the_mean_and_ignores_question_order(many, rng):
    scores = [response_score(r) for r in many]
    result = model_score(scores)
    shuffled = list(scores)
    rng.shuffle(shuffled)
    assert model_score(shuffled).gamut == result.gamut  # fsum: exact whatever the order
    assert min(s.gamut for s in scores) - EPS <= result.gamut <= max(s.gamut for s in scores) + EPS
    assert (result.questions, result.scored, result.missing, result.failed) == (
        len(scores),
        len(scores),
        0,
        0,
    )
