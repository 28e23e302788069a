"""Paired comparisons: by hand, against scipy's paired t test and statsmodels' Holm."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judging.leaderboard.comparisons import holm, minimum_detectable_difference, paired, pairwise

nan = float("nan")


def test_a_paired_difference_by_hand():
    x = np.array([0.5, 0.7, 0.2, nan, 0.9])
    y = np.array([0.4, 0.4, 0.3, 0.8, nan])
    result = paired("a", "b", x, y)
    # Questions scored for both: 0, 1, 2; differences x100: 10, 30, -10.
    assert result.n == 3
    assert result.difference == pytest.approx(10.0)
    sd = math.sqrt(((10 - 10) ** 2 + (30 - 10) ** 2 + (-10 - 10) ** 2) / 2)
    assert result.sd == pytest.approx(sd)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert (result.low, result.high) == pytest.approx((10 - half, 10 + half))
    assert result.p == pytest.approx(stats.ttest_rel(x[:3], y[:3]).pvalue)


def test_edge_cases_say_what_they_can():
    assert paired("a", "b", np.array([nan]), np.array([0.5])).difference is None
    one = paired("a", "b", np.array([0.5]), np.array([0.25]))
    assert (one.n, one.difference, one.low, one.p) == (1, 25.0, None, None)
    same = paired("a", "b", np.array([0.5, 0.6]), np.array([0.4, 0.5]))
    assert same.difference == pytest.approx(10.0) and same.sd == 0.0 and same.p == 0.0


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    pvalues = list(rng.uniform(0, 0.2, size=12))
    expected = multipletests(pvalues, alpha=0.05, method="holm")[1]
    assert holm(pvalues) == pytest.approx(list(expected))
    assert holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])


def test_pairwise_on_models_with_known_differences():
    rng = np.random.default_rng(11)
    base = rng.uniform(-0.5, 0.5, size=400)
    scores = np.array(
        [
            base + 0.20 + rng.normal(0, 0.05, 400),  # clearly best
            base + 0.002 + rng.normal(0, 0.05, 400),  # the next two cannot be told apart
            base + rng.normal(0, 0.05, 400),
        ]
    )
    pairs = {(p.a, p.b): p for p in pairwise(["x", "y", "z"], scores)}
    assert set(pairs) == {("x", "y"), ("x", "z"), ("y", "z")}
    assert pairs[("x", "y")].significant and pairs[("x", "z")].significant
    assert not pairs[("y", "z")].significant
    assert pairs[("x", "z")].low < 20 < pairs[("x", "z")].high
    assert all(p.p_holm >= p.p for p in pairs.values())


def test_the_minimum_detectable_difference():
    # (1.96 + 0.84) * 20 / sqrt(400) = 2.80
    assert minimum_detectable_difference(20.0, 400) == pytest.approx(
        (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 20 / 20
    )
    assert minimum_detectable_difference(None, 400) is None
    assert minimum_detectable_difference(10.0, 1) is None


# --- on the leaderboard ---------------------------------------------------------------------


@pytest.fixture
def three_models(judge, respond):
    """model-a meets every check; model-b and model-c meet the first of two checks on every
    question but one, where they differ by one check: a is ahead, b and c cannot be told
    apart. The text-only answers of model-a meet half the checks."""
    from judging.tests.conftest import final_checks, make_question
    from judging.verdicts.services import verdict_record

    questions = [make_question(f"pq{i}", tiers=("answer_critical", "valuable")) for i in range(12)]
    plan = {
        "model-a": lambda i, k: "meets",
        "model-b": lambda i, k: "meets" if k == 0 or i == 0 else "missing",
        "model-c": lambda i, k: "meets" if k == 0 or i == 1 else "missing",
    }
    for model, verdict in plan.items():
        for i, question in enumerate(questions):
            response = respond(question, model=model)
            for k, check in enumerate(final_checks(question)):
                verdict_record(judge=judge, response=response, check=check, verdict=verdict(i, k))
    for i, question in enumerate(questions):
        response = respond(question, model="model-a", setting="text_only")
        for k, check in enumerate(final_checks(question)):
            verdict_record(
                judge=judge,
                response=response,
                check=check,
                verdict="meets" if (i + k) % 2 else "missing",
            )
    return questions


def test_the_board_compares_every_pair_and_marks_ties(judge, three_models):
    from judging.leaderboard.board import leaderboard

    board = leaderboard(judge=judge, setting="multimodal")
    assert [r.model for r in board.rows][0] == "model-a"
    pairs = {(p.a, p.b): p for p in board.comparisons}
    assert len(pairs) == 3
    a_b = pairs[("model-a", next(r.model for r in board.rows[1:2]))]
    assert a_b.n == 12 and a_b.difference == pytest.approx(100 * 0.3 * 11 / 12 / 0.9, rel=1e-6)
    assert a_b.significant
    assert board.rows[0].indistinguishable_from_next is False
    assert board.rows[1].indistinguishable_from_next is True  # b and c
    assert board.rows[2].indistinguishable_from_next is False  # nothing below
    assert board.minimum_detectable_difference is not None


def test_the_page_json_csv_and_api_show_the_comparisons(client, root, judge, three_models):
    import csv
    import io

    from django.urls import reverse

    client.force_login(root)
    page = client.get(reverse("leaderboard")).content.decode()
    assert 'data-testid="matrix"' in page and "sig-better-strong" in page
    assert page.count('data-testid="tie"') == 1
    data = client.get(reverse("leaderboard"), {"format": "json"}).json()
    assert len(data["comparisons"]) == 3 and data["minimum_detectable_difference"] > 0
    assert [r["indistinguishable_from_next"] for r in data["rows"]] == [False, True, False]
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    reverse("leaderboard"), {"format": "csv", "table": "comparisons"}
                ).content.decode()
            )
        )
    )
    assert len(rows) == 3 and {"p_holm", "significant"} <= set(rows[0])
    assert client.get(reverse("leaderboard"), {"format": "csv", "table": "x"}).status_code == 400
    api = client.get(reverse("api_leaderboard")).json()
    assert api["comparisons"] == data["comparisons"]


def test_the_cost_of_visual_identification_as_a_paired_difference(judge, three_models):
    from judging.leaderboard.reports import settings_report

    row = next(r for r in settings_report(judge)["rows"] if r["model"] == "model-a")
    # Multimodal: every question 1. Text-only: one check of two met, alternating which:
    # G = 0.6/0.9 (answer-critical met) or 0.3/0.9 (valuable met).
    text = [(0.6 if i % 2 else 0.3) / 0.9 for i in range(12)]
    differences = [100 * (t - 1) for t in text]
    assert row["paired_questions"] == 12
    assert row["paired_cost"] == pytest.approx(sum(differences) / 12, abs=1e-4)
    assert row["paired_ci_low"] < row["paired_cost"] < row["paired_ci_high"]
    assert row["paired_p"] < 0.001
