"""Human spot checks (drawing, leases, grading, blindness, agreement) and the scoring settings."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from judging.models import Judge, ScoringConfig, SpotCheck
from judging.spot_checks.services import (
    SpotCheckError,
    disagreements,
    judge_agreement,
    spot_check_claim,
    spot_check_grade,
    spot_checks_draw,
)
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.scoring import DEFAULT_SETTINGS
from judging.verdicts.services import scoring_settings, verdict_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def graded_world(respond):
    """Two judges on two questions of three checks: they disagree on three checks."""
    a, b = Judge.objects.create(name="judge-a"), Judge.objects.create(name="judge-b")
    responses = []
    plan = {  # (question, check) -> (judge-a, judge-b)
        (0, 0): ("meets", "meets"),
        (0, 1): ("meets", "missing"),
        (0, 2): ("contradicts", "partially_meets"),
        (1, 0): ("missing", "missing"),
        (1, 1): ("partially_meets", "meets"),
        (1, 2): ("meets", "failed"),
    }
    for q in range(2):
        question = make_question(f"q{q}")
        response = respond(question, text=f"Answer {q}.")
        responses.append(response)
        for c, check in enumerate(final_checks(question)):
            for judge, verdict in zip((a, b), plan[(q, c)], strict=True):
                verdict_record(
                    judge=judge,
                    response=response,
                    check=check,
                    verdict=verdict,
                    rationale=f"{judge.name} says {verdict}",
                )
    return a, b, responses


def test_disagreements_are_non_failed_differences_and_draws_never_repeat(graded_world, root):
    pairs = disagreements()
    assert len(pairs) == 3  # (0,1), (0,2), (1,1); a failed verdict is no disagreement
    assert spot_checks_draw(count=2, user=root, seed=1) == 2
    assert len(disagreements()) == 1
    assert spot_checks_draw(count=10, user=root, seed=1) == 1  # only one was left
    assert spot_checks_draw(count=10, user=root) == 0
    assert SpotCheck.objects.count() == 3
    with pytest.raises(SpotCheckError):
        spot_checks_draw(count=0, user=root)


def test_claims_are_leases_and_the_first_grade_stands(graded_world, root, dave, alice):
    spot_checks_draw(count=3, user=root, seed=1)
    mine = spot_check_claim(user=dave)
    assert spot_check_claim(user=dave) == mine  # the same one while held
    other = spot_check_claim(user=root)
    assert other is not None and other != mine
    with pytest.raises(SpotCheckError, match="another grader holds"):
        spot_check_grade(spot_check_id=mine.pk, user=root, verdict="meets")
    with pytest.raises(SpotCheckError, match="choose one of"):
        spot_check_grade(spot_check_id=mine.pk, user=dave, verdict="failed")
    spot_check_grade(spot_check_id=mine.pk, user=dave, verdict="missing", note=" fine ")
    with pytest.raises(SpotCheckError, match="graded already"):
        spot_check_grade(spot_check_id=mine.pk, user=dave, verdict="meets")
    mine.refresh_from_db()
    assert (mine.verdict, mine.note, mine.graded_by) == ("missing", "fine", dave)
    # An expired lease is free for the next grader.
    later = timezone.now() + timedelta(hours=1)
    assert spot_check_claim(user=alice, now=later) is not None


def test_agreement_with_people(graded_world, root, dave):
    a, b, responses = graded_world
    spot_checks_draw(count=3, user=root, seed=1)
    grades = {
        ("Answer 0.", "check 1"): "missing",
        ("Answer 0.", "check 2"): "contradicts",
        ("Answer 1.", "check 1"): "meets",
    }
    for spot in SpotCheck.objects.select_related("response", "check_row"):
        spot_check_grade(
            spot_check_id=spot.pk,
            user=dave,
            verdict=grades[(spot.response.text, spot.check_row.text)],
        )
    rows = {row.judge: row for row in judge_agreement()}
    # judge-a: meets/missing(x), contradicts/contradicts(ok), partially/meets(x, same side)
    assert (rows["judge-a"].graded, rows["judge-a"].exact, rows["judge-a"].passing) == (3, 1, 2)
    # judge-b: missing(ok), partially/contradicts(x), meets(ok)
    assert (rows["judge-b"].graded, rows["judge-b"].exact, rows["judge-b"].passing) == (3, 2, 2)
    assert rows["judge-b"].exact_rate == pytest.approx(2 / 3)


def test_grading_page_is_blind_and_keyboard_ready(client, graded_world, root, dave):
    spot_checks_draw(count=3, user=root, seed=1)
    client.force_login(dave)
    page = client.post(reverse("spot_checks"), follow=True).content.decode()
    assert 'data-testid="spot-check"' in page
    assert 'data-key="1"' in page and 'data-key="4"' in page
    assert "judge-a" not in page and "judge-b" not in page and "says" not in page
    # The answer is read before the verdict is chosen: it comes above the form.
    assert page.index('data-testid="response"') < page.index('<fieldset class="decisions">')
    spot = SpotCheck.objects.get(claimed_by=dave)
    answer = client.post(reverse("spot_check_grade", args=[spot.pk]), {"decision": "meets"})
    assert answer.status_code == 302
    spot.refresh_from_db()
    assert spot.verdict == "meets" and spot.graded_by == dave


# A visit of the grading page that shows the spot check held (measured; it claims nothing).
SPOT_PAGE = 7


def test_a_visit_claims_nothing_the_post_claims_with_its_token(
    graded_world, root, dave, django_assert_num_queries
):
    """Issue 22: GET /judging/spot-checks/ claimed the next spot check, so a link from another
    site could; now a visit reads what the grader holds, and the page claims with a POST."""
    from django.test import Client

    spot_checks_draw(count=3, user=root, seed=1)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(dave)
    page = strict.get(reverse("spot_checks")).content.decode()
    assert not SpotCheck.objects.filter(claimed_by__isnull=False).exists()
    assert 'id="claim-form" method="post"' in page and 'hx-trigger="load"' in page
    assert "no-store" in strict.get(reverse("spot_checks"))["Cache-Control"]
    assert strict.post(reverse("spot_checks"), HTTP_HX_REQUEST="true").status_code == 403
    assert not SpotCheck.objects.filter(claimed_by__isnull=False).exists()
    token = strict.cookies["csrftoken"].value
    panel = strict.post(reverse("spot_checks"), HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert 'data-testid="spot-check"' in panel.content.decode() and "<html" not in str(panel)
    held = SpotCheck.objects.get(claimed_by=dave)
    with django_assert_num_queries(SPOT_PAGE):  # the spot check held, shown
        shown = strict.get(reverse("spot_checks")).content.decode()
    assert 'data-testid="spot-check"' in shown
    assert SpotCheck.objects.get(claimed_by=dave) == held
    # Graded without JavaScript: the next one is claimed in that POST, shown by the redirect.
    graded = strict.post(
        reverse("spot_check_grade", args=[held.pk]),
        {"decision": "meets", "csrfmiddlewaretoken": token},
    )
    assert graded.status_code == 302
    assert SpotCheck.objects.filter(claimed_by=dave, graded_at__isnull=True).count() == 1


def test_who_may_grade_and_who_may_draw(client, graded_world, alice, carol, dave, root):
    for person in (alice, carol):
        client.force_login(person)
        assert client.get(reverse("spot_checks")).status_code == 403
        assert client.post(reverse("spot_check_grade", args=[1]), {}).status_code == 403
    client.force_login(dave)
    assert client.get(reverse("spot_checks")).status_code == 200
    assert client.get(reverse("spot_check_results")).status_code == 403
    assert client.post(reverse("spot_check_results"), {"count": 3}).status_code == 403
    client.logout()
    assert client.get(reverse("spot_check_results")).status_code == 302
    client.force_login(root)
    assert client.post(reverse("spot_check_results"), {"count": "x"}).status_code == 302
    assert not SpotCheck.objects.exists()
    client.post(reverse("spot_check_results"), {"count": 2})
    assert SpotCheck.objects.count() == 2
    data = json.loads(client.get(reverse("spot_check_results") + "?format=json").content)
    assert data["progress"] == {"total": 2, "graded": 0, "left": 2}
    csv_text = client.get(reverse("spot_check_results") + "?format=csv").content.decode()
    assert csv_text.splitlines()[0] == "judge,graded,exact,exact_rate,same_side,same_side_rate"


def test_scoring_settings_come_from_the_one_row_and_are_validated():
    assert scoring_settings() == DEFAULT_SETTINGS
    ScoringConfig.objects.create(
        pk=1,
        partial_credit=0.25,
        mu=-1.0,
        weight_answer_critical=1,
        weight_valuable=0,
        weight_context=0,
    )
    assert scoring_settings().lambda_ == 0.25 and scoring_settings().weights == (1.0, 0.0, 0.0)
    bad = ScoringConfig(partial_credit=1.5, mu=1.0)
    with pytest.raises(ValidationError) as caught:
        bad.full_clean()
    assert "lambda must lie strictly between 0 and 1" in str(caught.value)
    assert "mu must be negative" in str(caught.value)


def test_agreement_over_the_api_is_the_pages_json(client, graded_world, root, dave, alice):
    from rest_framework.test import APIClient

    spot_checks_draw(count=3, user=root, seed=1)
    spot = SpotCheck.objects.first()
    spot_check_grade(spot_check_id=spot.pk, user=dave, verdict="meets")
    api = APIClient()
    assert api.get("/api/spot-checks/agreement/").status_code == 401
    api.force_authenticate(alice)
    assert api.get("/api/spot-checks/agreement/").status_code == 403
    api.force_authenticate(root)
    answer = api.get("/api/spot-checks/agreement/")
    client.force_login(root)
    page = client.get(reverse("spot_check_results") + "?format=json")
    assert answer.status_code == 200 and answer.json() == json.loads(page.content)
    assert answer.json()["progress"] == {"total": 3, "graded": 1, "left": 2}
    assert "/api/spot-checks/agreement/" in client.get("/api/schema/").content.decode()
