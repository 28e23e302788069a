"""Checks that carry no information, found on a generated set whose dead checks are known."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.urls import reverse

from judging.checks.info import DISAGREED, MET_BY_ALL, MET_BY_NONE, check_information
from judging.checks.report import check_report
from judging.models import Judge
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

SKILL = {"m1": 0.9, "m2": 0.7, "m3": 0.5, "m4": 0.3, "m5": 0.1}


def test_difficulty_discrimination_and_disagreement_by_hand():
    graded = [(1, 10, m, "meets") for m in (1, 2, 3)] + [
        (2, 10, 1, "meets"),
        (2, 10, 2, "partially_meets"),
        (2, 10, 3, "missing"),
    ]
    rest = {(1, 10): 0.9, (2, 10): 0.5, (3, 10): 0.1}
    judged = [(2, r, j, v) for r in (100, 101, 102) for j, v in ((1, "meets"), (2, "missing"))]
    infos = {i.check: i for i in check_information(graded, rest, judged)}
    assert infos[1].difficulty == 1.0 and infos[1].flags == [MET_BY_ALL]
    assert infos[1].discrimination is None  # no spread in the credits
    assert infos[2].difficulty == pytest.approx(0.5)
    assert infos[2].discrimination == pytest.approx(
        np.corrcoef([1.0, 0.5, 0.0], [0.9, 0.5, 0.1])[0, 1]
    )
    assert infos[2].disagreement == 1.0 and infos[2].shared == 3


@pytest.fixture
def generated(db, respond):
    """5 models of known skill x 10 questions x 4 checks: C0 met by every model, C1 by none,
    C2 met by the skilled models (discriminating), C3 met regardless of skill. A second judge agrees
    with the first everywhere but on one question's C3, where it always says otherwise."""
    first, second = Judge.objects.create(name="judge-a"), Judge.objects.create(name="judge-b")
    questions = [
        make_question(f"g{i}", tiers=("answer_critical", "answer_critical", "valuable", "context"))
        for i in range(10)
    ]
    for model, skill in SKILL.items():
        for n, question in enumerate(questions):
            response = respond(question, model=model)
            for k, check in enumerate(final_checks(question)):
                verdict = {
                    0: "meets",
                    1: "missing",
                    # met by the models above a bar that rises with the question
                    2: "meets" if skill > 0.2 + 0.06 * n else "missing",
                    # m1, m3, m5 on even questions, m2, m4 on odd: unrelated to skill
                    3: "meets" if (int(model[1]) + n) % 2 else "missing",
                }[k]
                verdict_record(judge=first, response=response, check=check, verdict=verdict)
                other = verdict
                if n == 4 and k == 3:
                    other = "contradicts" if verdict == "meets" else "meets"
                verdict_record(judge=second, response=response, check=check, verdict=other)
    return first, questions


def test_the_dead_checks_of_a_generated_set_are_flagged(generated):
    judge, questions = generated
    report = check_report(judge, "multimodal", flagged_only=False)
    assert report["checks"] == 40
    by_check = {(r["source_id"], r["check_id"]): r for r in report["rows"]}
    for n in range(10):
        assert MET_BY_ALL in by_check[(f"g{n}", "C0")]["flags"]
        assert MET_BY_NONE in by_check[(f"g{n}", "C1")]["flags"]
        assert not by_check[(f"g{n}", "C2")]["flags"]
    assert by_check[("g4", "C3")]["flags"] == [DISAGREED]
    assert sum(1 for r in report["rows"] if DISAGREED in r["flags"]) == 1
    discriminating = np.mean([by_check[(f"g{n}", "C2")]["discrimination"] or 0 for n in range(10)])
    at_random = np.mean([by_check[(f"g{n}", "C3")]["discrimination"] or 0 for n in range(10)])
    assert discriminating > 0.6 and abs(at_random) < 0.3
    assert report["flagged"] == 21


def test_the_page_csv_json_and_api_for_the_rubric_team(client, generated, dave, alice):
    url = reverse("flagged_checks")
    client.force_login(alice)
    assert client.get(url).status_code == 403
    client.force_login(dave)
    page = client.get(url).content.decode()
    assert "21 of 40 checks flagged" in page
    assert page.count('href="/rubrics/') >= 21
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).content.decode())))
    assert len(rows) == 21
    data = client.get(url, {"format": "json"}).json()
    assert data["flagged"] == 21
    api = client.get(reverse("api_flagged_checks")).json()
    assert api["rows"] == data["rows"]
    assert client.get(url, {"setting": "audio"}).status_code == 400
    assert client.get(reverse("api_flagged_checks"), {"judge": "nobody"}).status_code == 400


def test_the_rubric_page_lists_its_flagged_checks(client, generated, dave):
    _, questions = generated
    client.force_login(dave)
    page = client.get(reverse("rubric_history", args=[questions[4].rubric.pk])).content.decode()
    assert 'data-testid="flagged-here"' in page
    assert "C0" in page and DISAGREED in page and MET_BY_NONE in page
