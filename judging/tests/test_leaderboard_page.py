"""The leaderboard page after a rubric round: it says why responses are pending and offers the
judging job, with its estimate, right there; its chart draws the 95% intervals as error bars."""

from __future__ import annotations

import re
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.http import QueryDict
from django.urls import reverse

from judging.models import Judge
from judging.runs.views import JudgeForm
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record
from llm.models import LLMModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm_judge():
    model = LLMModel.objects.create(
        name="judge-llm",
        provider="gemini",
        model="gemini-2.5-pro",
        price_input_per_million=Decimal("1.00"),
        price_output_per_million=Decimal("10.00"),
    )
    return Judge.objects.create(name="gemini-judge", llm_model=model)


def page(client, root, **params):
    client.force_login(root)
    response = client.get(reverse("leaderboard"), params)
    assert response.status_code == 200
    return response.content.decode()


def test_pending_responses_are_explained_with_the_launch_and_its_estimate(
    client, root, llm_judge, respond, django_assert_num_queries
):
    judged, revised = make_question("q0"), make_question("q1")
    for question in (judged, revised):
        response = respond(question)
        for check in final_checks(question):
            verdict_record(judge=llm_judge, response=response, check=check, verdict="meets")
    # A rubric round gives q1 a new final version with one more check: q1's answer is pending.
    from django.utils import timezone

    from judging.tests.conftest import add_checks
    from rubrics.models import RubricVersion

    version = RubricVersion.objects.create(
        rubric=revised.rubric, stage="human_1", meta_rubric={}, frozen_at=timezone.now()
    )
    add_checks(version, ("answer_critical", "valuable", "context", "valuable"))
    client.force_login(root)
    # The page's own queries (the releases for its selector: none here, so the working draft),
    # the estimate's (the draft's final versions, then judge_scope reads responses, their
    # sizes and the judge's counts as sets, then the earlier verdicts whose keys would be
    # copied), and the graded audit pairs (none here): a constant, whatever the number of
    # responses.
    with django_assert_num_queries(20):
        response = client.get(reverse("leaderboard"), {"judge": llm_judge.name})
    body = response.content.decode()
    section = re.search(
        r'<section class="card attention" data-testid="rejudge">(.*?)</section>', body, re.S
    ).group(1)
    assert "1 response waits for gemini-judge's verdicts" in section
    # the new version's four checks, one call each at most, at the page's typical tokens
    assert (
        "1 response, at most 4 calls to <code>judge-llm</code>, about 8800 tokens in and "
        "320 out, cost about 0.0120." in section
    )
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]+)">', section))
    fields.pop("csrfmiddlewaretoken")
    assert fields == {
        "what": "judge",
        "judge-judge": str(llm_judge.pk),
        "judge-settings": "multimodal",
    }
    form = JudgeForm(QueryDict(urlencode(fields)), prefix="judge")  # as the launch reads it
    assert form.is_valid(), form.errors
    assert "Launch the judging (1 item)" in section


def test_a_judge_without_a_model_is_told_what_to_do_instead(client, root, respond):
    Judge.objects.create(name="imported-judge")
    respond(make_question("q0"))
    body = page(client, root)
    assert "1 response waits for imported-judge's verdicts" in body
    assert "imported-judge has no LLM model configured" in body
    assert "Launch the judging" not in body


def test_nothing_pending_says_nothing_and_intervals_are_error_bars(
    client, root, llm_judge, respond
):
    for i in range(3):
        question = make_question(f"q{i}")
        response = respond(question)
        for n, check in enumerate(final_checks(question)):
            verdict_record(
                judge=llm_judge,
                response=response,
                check=check,
                verdict=["meets", "missing", "partially_meets"][(n + i) % 3],
            )
    body = page(client, root)
    assert 'data-testid="rejudge"' not in body
    bars = re.findall(r'<g class="error-bar" data-testid="error-bar">(.*?)</g>', body)
    assert len(bars) == 1  # one model, with an interval: a whisker and two caps
    assert bars[0].count("<line ") == 3
    assert re.search(r'aria-label="Gamut [\d.-]+, 95% interval [\d.-]+ to [\d.-]+"', body)


# --- the per-question heatmap and the shaded confusion matrix --------------------------------


def test_question_page_is_a_heatmap_of_checks_by_answer_and_judge(client, root):
    from judging.tests.test_analysis_pages import build_world

    build_world()
    client.force_login(root)
    body = client.get(reverse("results_question", args=["q0"])).content.decode()
    heatmap = re.search(
        r'<table class="heatmap" data-testid="heatmap">(.*?)</table>', body, re.S
    ).group(1)
    # q0's final version has two checks; three models x two settings x two judges = 12 columns
    rows = re.findall(r"<tr><th scope=\"row\">(.*?)</tr>", heatmap, re.S)
    assert len(rows) == 2
    cells = [re.findall(r'<td class="hm verdict-([a-z_]+)"', row) for row in rows]
    assert [len(c) for c in cells] == [12, 12]
    # gpt-judge has not judged claude's text-only answer in the new version: "not judged"
    columns = re.findall(r'<th scope="col" class="judge"><span>([^<]+)</span>', heatmap)
    answers = re.findall(r'class="answer">([^<]+)<br><span class="small">([^<]+)</span>', heatmap)
    assert len(columns) == 12 and len(answers) == 6
    gap = answers.index(("claude", "text-only")) * 2 + columns[:2].index("gpt-judge")
    assert cells[0][gap] == cells[1][gap] == "none"
    assert sum(c.count("none") for c in cells) == 2
    assert "visually-hidden" in heatmap  # the verdict in words beside its mark
    # the rationales stay, folded under each answer
    assert body.count("<summary>Verdicts with the judges' rationales</summary>") == 6


def test_confusion_matrix_cells_are_shaded_by_count(client, root):
    from judging.tests.test_analysis_pages import build_world

    build_world()
    client.force_login(root)
    body = client.get(reverse("results_judges")).content.decode()
    table = re.search(
        r'<table class="list confusion" data-testid="confusion">(.*?)</table>', body, re.S
    ).group(1)
    cells = re.findall(r'<td class="num shade-(\d)( diagonal)?">(?:<strong>)?(\d+)', table)
    assert len(cells) == 25
    counts = [int(n) for _, _, n in cells]
    most = max(counts)
    for shade, _, n in cells:
        assert int(shade) == -(-5 * int(n) // most)  # ceil(5 n / most)
    assert sum(1 for _, diagonal, _ in cells if diagonal) == 5
