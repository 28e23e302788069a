"""The leaderboard ranks only comparable rows and gives no interval that means nothing
(issue 24, section 2)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from judging.leaderboard.board import leaderboard
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def uneven(judge, respond):
    """full-model answers all 4 questions (half the checks met on one); one-question-model
    answers 1, and misses every check of it (a low score that would rank last anyway)."""
    questions = [make_question(f"rq{i}", tiers=("answer_critical", "valuable")) for i in range(4)]
    for i, question in enumerate(questions):
        response = respond(question, model="full-model")
        for k, check in enumerate(final_checks(question)):
            verdict_record(
                judge=judge,
                response=response,
                check=check,
                verdict="missing" if i == 0 and k == 0 else "meets",
            )
    response = respond(questions[0], model="a-very-long-model-name-that-should-stay-on-one-line")
    for check in final_checks(questions[0]):
        verdict_record(judge=judge, response=response, check=check, verdict="meets")
    return questions


LONG = "a-very-long-model-name-that-should-stay-on-one-line"


def test_a_row_scored_on_1_of_4_is_listed_unranked_with_no_interval(judge, uneven):
    board = leaderboard(judge=judge, setting="multimodal")
    # The one-question model scores higher (it met everything) but is not ranked above.
    assert [(r.model, r.ranked, r.rank, r.scored) for r in board.rows] == [
        ("full-model", True, 1, 4),
        (LONG, False, None, 1),
    ]
    assert board.rows[1].gamut > board.rows[0].gamut
    assert (board.rows[1].low, board.rows[1].high) == (None, None)  # n = 1: no interval
    assert board.rows[0].low < board.rows[0].high
    assert board.rows[0].indistinguishable_from_next is False  # not compared with unranked


def test_the_page_says_why_and_the_exports_say_ranked(
    client, root, judge, uneven, django_assert_num_queries
):
    client.force_login(root)
    with django_assert_num_queries(11):
        page = client.get(reverse("leaderboard"), {"judge": judge.name}).content.decode()
    ranks = re.findall(r'data-testid="rank">([^<]*)<', page)
    assert ranks == ["1", "–"]
    assert "not ranked: scored on 1 of 4 questions" in page
    intervals = re.findall(r'data-testid="interval">(.*?)</td>', page)
    assert "n too small" in intervals[1] and "–" in intervals[0]
    assert 'class="table-scroll"' in page and 'class="chart-col"' in page
    data = client.get(reverse("leaderboard"), {"judge": judge.name, "format": "json"}).json()
    assert [(r["model"], r["ranked"], r["ci_low"]) for r in data["rows"]][1] == (LONG, False, None)
    csv_text = client.get(reverse("leaderboard"), {"judge": judge.name, "format": "csv"})
    assert "ranked" in csv_text.content.decode().splitlines()[0].split(",")
