"""Scoring by the examples of ../shared/spec/rubric-method.md, section 4, and its settings.

Expected figures are written out as arithmetic from the formula, not computed with the module.
"""

from __future__ import annotations

import pytest

from judging.verdicts.scoring import (
    FAILED,
    MISSING,
    ResponseScore,
    ScoringError,
    ScoringSettings,
    SettingsInvalid,
    Unscorable,
    VerdictCounts,
    model_score,
    response_score,
    tier_score,
)

AC = VerdictCounts(meets=3, missing=1)
V = VerdictCounts(meets=1, contradicts=1)


def test_answer_critical_example():
    assert tier_score(AC) == 0.75


def test_valuable_example_follows_the_formula():
    # s = (M + mu*C) / (M + |mu|*C) = (1 - 2) / (1 + 2). The spec prints "(1-2)/(2+2) = -0.25",
    # which counts the contradiction both as a check and as |mu| checks; that arithmetic
    # contradicts its own formula and its "all contradicts -> -1" (it would give -2/3), so the
    # formula wins here. Reported to the lead as a spec erratum.
    assert tier_score(V) == pytest.approx(-1 / 3)
    assert tier_score(V) != pytest.approx(-0.25)


def test_gamut_example_with_no_context_checks():
    score = response_score({"answer_critical": AC, "valuable": V})
    assert score.tiers == {"answer_critical": 0.75, "valuable": pytest.approx(-1 / 3)}
    assert score.gamut == pytest.approx((0.6 * 0.75 + 0.3 * (-1 / 3)) / 0.9)
    assert score.gamut == pytest.approx(0.38889, abs=5e-6)


def test_gamut_formula_reproduces_the_spec_figure_from_the_spec_tier_scores():
    # The renormalisation itself, fed the spec's printed tier scores, gives its 0.41667.
    settings = ScoringSettings()
    weights = settings.weights
    assert (weights[0] * 0.75 + weights[1] * -0.25) / (weights[0] + weights[1]) == pytest.approx(
        0.41667, abs=5e-6
    )


def test_all_meets_is_one_and_all_contradicts_is_minus_one():
    meets = response_score(
        {"answer_critical": {"meets": 4}, "valuable": {"meets": 2}, "context": {"meets": 1}}
    )
    assert meets == ResponseScore(1.0, {"answer_critical": 1.0, "valuable": 1.0, "context": 1.0})
    wrong = response_score({"answer_critical": {"contradicts": 3}, "context": {"contradicts": 9}})
    assert wrong == ResponseScore(-1.0, {"answer_critical": -1.0, "context": -1.0})


def test_partial_credit_and_every_verdict_in_one_tier():
    counts = VerdictCounts(meets=2, partially_meets=2, missing=1, contradicts=1)
    assert tier_score(counts) == pytest.approx((2 + 0.5 * 2 - 2) / (2 + 2 + 1 + 2))
    assert tier_score({"partially_meets": 1}) == 0.5


def test_weights_are_redistributed_over_the_tiers_present():
    only_ac = response_score({"answer_critical": {"meets": 1}, "valuable": {}})
    assert only_ac.gamut == 1.0 and only_ac.tiers == {"answer_critical": 1.0}
    ac_c = response_score({"answer_critical": {"meets": 1}, "context": {"missing": 1}})
    assert ac_c.gamut == pytest.approx(0.6 / 0.7)
    v_c = response_score({"valuable": {"meets": 1}, "context": {"contradicts": 1}})
    assert v_c.gamut == pytest.approx((0.3 - 0.1) / 0.4)
    only_c = response_score({"context": {"partially_meets": 1}})
    assert only_c.gamut == 0.5


def test_lambda_and_mu_are_settings():
    counts = {"meets": 1, "partially_meets": 1, "contradicts": 1}
    assert tier_score(counts) == pytest.approx((1 + 0.5 - 2) / (1 + 1 + 2))
    assert tier_score(counts, ScoringSettings(lambda_=0.25, mu=-1)) == pytest.approx(
        (1 + 0.25 - 1) / (1 + 1 + 1)
    )
    assert tier_score(counts, ScoringSettings(mu=-4)) == pytest.approx((1 + 0.5 - 4) / (2 + 4))


def test_a_light_mu_lets_a_contradiction_beat_an_omission():
    # Only mu < 0 is required, but with |mu| < 1 a contradiction counts as less than one check,
    # so replacing a missing by a contradicts can raise the score: (0.5 - 0.125) / 1.125 = 1/3
    # against 0.5 / 2 = 0.25. The method text's "counts as more than one check" implies mu <= -1;
    # the property test uses that range. Left to the benchmark's settings, reported to the lead.
    light = ScoringSettings(mu=-0.125)
    assert tier_score({"partially_meets": 1, "missing": 1}, light) == 0.25
    assert tier_score({"partially_meets": 1, "contradicts": 1}, light) == pytest.approx(1 / 3)


def test_weights_are_settings():
    counts = {"answer_critical": AC, "valuable": V}
    even = response_score(counts, ScoringSettings(weights=(1, 1, 1)))
    assert even.gamut == pytest.approx((0.75 - 1 / 3) / 2)
    ac_only = response_score(counts, ScoringSettings(weights=(1, 0, 0)))
    assert ac_only.gamut == 0.75
    assert ac_only.tiers["valuable"] == pytest.approx(-1 / 3)  # still reported


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lambda_": 0},
        {"lambda_": 1},
        {"lambda_": -0.1},
        {"lambda_": float("nan")},
        {"mu": 0},
        {"mu": 0.5},
        {"mu": float("-inf")},
        {"weights": (0, 0, 0)},
        {"weights": (0.6, -0.1, 0.5)},
        {"weights": (1, 1)},
        {"weights": (1, float("inf"), 1)},
        {"lambda_": "0.5"},
    ],
)
def test_invalid_settings_are_refused(kwargs):
    with pytest.raises(SettingsInvalid):
        ScoringSettings(**kwargs)


def test_settings_are_frozen_with_the_spec_defaults():
    settings = ScoringSettings()
    assert (settings.lambda_, settings.mu, settings.weights) == (0.5, -2, (0.6, 0.3, 0.1))
    with pytest.raises(AttributeError):
        settings.mu = -1  # type: ignore[misc]
    assert [settings.value(v) for v in ("meets", "partially_meets", "missing", "contradicts")] == [
        1,
        0.5,
        0,
        -2,
    ]


def test_a_response_with_no_check_raises():
    with pytest.raises(Unscorable):
        response_score({})
    with pytest.raises(Unscorable):
        response_score({"answer_critical": VerdictCounts()})
    with pytest.raises(Unscorable):
        tier_score(VerdictCounts())


def test_only_zero_weight_tiers_raise():
    with pytest.raises(Unscorable, match="weight 0"):
        response_score({"context": {"meets": 1}}, ScoringSettings(weights=(1, 1, 0)))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tier_score({"meet": 1}), "unknown verdict"),
        (lambda: response_score({"critical": {"meets": 1}}), "unknown tier"),
        (lambda: VerdictCounts(meets=-1), "integer >= 0"),
        (lambda: VerdictCounts.of(["meets", "wrong"]), "unknown verdict"),
        (lambda: model_score([None]), "ResponseScore, MISSING or FAILED"),
    ],
)
def test_bad_input_raises(call, message):
    with pytest.raises(ScoringError, match=message):
        call()


def test_counts_of_verdicts():
    assert VerdictCounts.of(["meets", "contradicts", "meets"]) == VerdictCounts(
        meets=2, contradicts=1
    )


def test_model_score_means_and_counts_missing_and_failed():
    a = response_score({"answer_critical": AC, "valuable": V})
    b = response_score({"answer_critical": {"meets": 1}})
    result = model_score([a, MISSING, b, FAILED, MISSING])
    assert result.gamut == pytest.approx((a.gamut + 1.0) / 2)  # over the scored questions
    assert result.tiers == {
        "answer_critical": pytest.approx((0.75 + 1) / 2),
        "valuable": pytest.approx(-1 / 3),
    }
    assert (result.questions, result.scored, result.missing, result.failed) == (5, 2, 2, 1)
    assert not result.complete
    assert model_score([b]).complete


def test_model_score_of_nothing_scored_has_no_gamut():
    result = model_score([MISSING])
    assert result.gamut is None and result.tiers == {}
    assert (result.questions, result.scored, result.missing) == (1, 0, 1)


def test_the_module_imports_no_django():
    import ast
    from pathlib import Path

    import judging.verdicts.scoring

    tree = ast.parse(Path(judging.verdicts.scoring.__file__).read_text())
    modules = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "django" for name in modules)
