"""The random human audit (a stratified draw, pairs graded by two people), the leaderboard's
scores corrected by it, and the judges measured against people (judge_quality)."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from judging.leaderboard.board import EXPORT_COLUMNS, leaderboard
from judging.models import Judge, SpotCheck
from judging.spot_checks import judge_quality as quality
from judging.spot_checks.audit import allocate, audit_draw, audit_progress
from judging.spot_checks.judge_quality import judge_quality, measures
from judging.spot_checks.services import (
    SpotCheckError,
    spot_check_claim,
    spot_check_grade,
    spot_check_progress,
    spot_checks_draw,
)
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(respond):
    """Six questions of three checks (one per tier) in two domains, answered by two models;
    judge-a calls every check met, judge-b calls the valuable checks missing."""
    a, b = Judge.objects.create(name="judge-a"), Judge.objects.create(name="judge-b")
    for q in range(6):
        question = make_question(f"q{q}", domain=("food", "landmarks")[q % 2])
        for model in ("m1", "m2"):
            response = respond(question, model=model, text=f"{model} on q{q}.")
            for check in final_checks(question):
                verdict_record(judge=a, response=response, check=check, verdict="meets")
                verdict_record(
                    judge=b,
                    response=response,
                    check=check,
                    verdict="missing" if check.tier == "valuable" else "meets",
                )
    return a, b


def _strata(rows) -> Counter:
    return Counter(
        (s.check_row.tier, s.response.question.image.domain)
        for s in rows.select_related("check_row", "response__question__image")
    )


def test_allocation_is_proportional_by_largest_remainder():
    assert allocate({"a": 5, "b": 3, "c": 2}, 5) == {"a": 3, "b": 1, "c": 1}
    assert allocate({"a": 5, "b": 3, "c": 2}, 50) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 0}, 3) == {"a": 0}


def test_the_audit_is_stratified_joins_drawn_pairs_and_never_repeats(world, root):
    assert spot_checks_draw(count=1, user=root, seed=2) == 1  # a disagreement, drawn first
    disagreement = SpotCheck.objects.get()
    assert audit_draw(count=12, double_share=0.25, user=root, seed=3) == 12
    audit = SpotCheck.objects.filter(audit=True)
    # 36 pairs in 6 (tier, domain) strata of 6: 2 from each.
    assert set(_strata(audit).values()) == {2} and len(_strata(audit)) == 6
    assert audit.filter(double=True).count() == 3
    assert audit_draw(count=100, double_share=0, user=root, seed=4) == 24  # what was left
    assert audit_draw(count=5, double_share=0, user=root) == 0
    # Every pair once: the disagreement joined the audit rather than being drawn again.
    assert SpotCheck.objects.count() == 36 == audit.count()
    disagreement.refresh_from_db()
    assert disagreement.audit and disagreement.disagreement
    assert audit_progress() == {"pairs": 36, "graded": 0, "double": 3, "graded_twice": 0}
    with pytest.raises(SpotCheckError, match="at least one"):
        audit_draw(count=0, double_share=0, user=root)
    with pytest.raises(SpotCheckError, match="between 0 and 1"):
        audit_draw(count=1, double_share=1.5, user=root)


def test_a_pair_graded_twice_goes_to_another_person_who_does_not_see_the_first_grade(
    client, world, root, dave
):
    audit_draw(count=2, double_share=1, user=root, seed=1)
    first = spot_check_claim(user=dave)
    spot_check_grade(spot_check_id=first.pk, user=dave, verdict="contradicts", note="wrong year")
    assert spot_check_progress() == {"total": 2, "graded": 0, "left": 2}
    # dave is given the other pair, never the one he graded.
    assert spot_check_claim(user=dave).pk != first.pk
    with pytest.raises(SpotCheckError, match="another person"):
        spot_check_grade(spot_check_id=first.pk, user=dave, verdict="meets")
    client.force_login(root)
    page = client.post(reverse("spot_checks"), follow=True).content.decode()
    held = SpotCheck.objects.get(claimed_by=root)
    assert held.pk == first.pk and 'data-testid="second"' in page
    assert "wrong year" not in page and 'value="contradicts" data-key="4" required' in page
    assert "checked" not in page  # no verdict is preselected
    client.post(reverse("spot_check_grade", args=[first.pk]), {"decision": "missing"})
    first.refresh_from_db()
    assert (first.verdict, first.second_verdict, first.second_graded_by) == (
        "contradicts",
        "missing",
        root,
    )
    with pytest.raises(SpotCheckError, match="graded already"):
        spot_check_grade(spot_check_id=first.pk, user=root, verdict="meets")
    assert audit_progress()["graded_twice"] == 1
    assert spot_check_progress()["graded"] == 1


def _grade_all(people, verdict_of) -> None:
    for spot in SpotCheck.objects.select_related("check_row", "response__model"):
        spot_check_grade(spot_check_id=spot.pk, user=people, verdict=verdict_of(spot))


def test_the_leaderboard_is_corrected_by_the_audit(
    client, world, root, dave, django_assert_num_queries
):
    a, _ = world
    client.force_login(root)
    board = leaderboard(judge=a, setting="multimodal", audit=True)
    assert all(row.gamut == 100 and row.audited["estimate"] is None for row in board.rows)
    audit_draw(count=36, double_share=0, user=root, seed=5)
    # People find every valuable check missing: judge-a's 100 is lenient, judge-b is right.
    _grade_all(dave, lambda s: "missing" if s.check_row.tier == "valuable" else "meets")
    board = leaderboard(judge=a, setting="multimodal", audit=True)
    truth = 100 * 0.7  # (0.6 + 0.1) / 1.0 on every question
    for row in board.rows:
        c = row.corrected["gamut"]
        assert (c.pairs, c.questions) == (18, 6)
        # Every check audited: each question's estimate is exact, so the score is too.
        assert 100 * c.estimate == pytest.approx(truth)
        assert 100 * row.corrected["valuable"].estimate == pytest.approx(0)
        assert 100 * row.corrected["answer_critical"].estimate == pytest.approx(100)
    assert leaderboard(judge=a, setting="multimodal").rows[0].corrected == {}  # not asked
    data = client.get(reverse("leaderboard"), {"judge": "judge-a", "format": "json"}).json()
    assert data["rows"][0]["ppi_gamut"] == pytest.approx(truth)
    assert data["rows"][0]["ppi_pairs"] == 18
    api = APIClient()
    api.force_authenticate(root)
    assert api.get("/api/leaderboard/", {"judge": "judge-a"}).json() == data
    text = client.get(reverse("leaderboard"), {"judge": "judge-a", "format": "csv"})
    header = next(csv.reader(io.StringIO(text.content.decode())))
    # the board's columns, then the release it scores (none cut: the working draft)
    assert header == [*EXPORT_COLUMNS, "release", "release_hash"]
    assert "ppi_gamut_ci_low" in header
    # The page: one query for the graded audit pairs, one for the judge's verdicts on them
    # (and one for the releases, none here, in its selector).
    with django_assert_num_queries(12):
        page = client.get(reverse("leaderboard"), {"judge": "judge-a"}).content.decode()
    assert 'data-testid="corrected">70.0' in page


def _labelled_world(world, root, dave, erin_reviser):
    """Four audit pairs graded by dave (and three of them by a second person): people say
    meets, missing, missing, partially meets where judge-a said meets on all four."""
    audit_draw(count=4, double_share=0.75, user=root, seed=9)
    spots = list(SpotCheck.objects.order_by("pk"))
    people = ["meets", "missing", "missing", "partially_meets"]
    for spot, verdict in zip(spots, people, strict=True):
        spot_check_grade(spot_check_id=spot.pk, user=dave, verdict=verdict)
    seconds = iter(["meets", "missing", "meets"])
    for spot in spots:
        if spot.double:
            spot_check_grade(spot_check_id=spot.pk, user=erin_reviser, verdict=next(seconds))
    return spots


@pytest.fixture
def second_grader(db):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user("frank", password="x")
    user.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    return user


def test_measures_by_hand():
    people = ["meets", "missing", "missing", "partially_meets"]
    judge = ["meets", "meets", "missing", "partially_meets"]
    m = measures(people, judge)
    assert m["verdicts"]["meets"] == {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1}
    assert m["verdicts"]["missing"] == {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2}
    assert m["verdicts"]["contradicts"] == {
        "precision": None,
        "recall": None,
        "f1": None,
        "support": 0,
    }
    # Observed agreement 3/4; chance (1*2 + 2*1 + 1*1) / 16 = 5/16.
    assert m["kappa"] == pytest.approx((3 / 4 - 5 / 16) / (1 - 5 / 16))
    assert m["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert measures(["meets"], ["meets"])["kappa"] is None  # undefined with one verdict


def test_judges_against_people_with_the_ceiling_and_calibration(
    world, root, dave, second_grader, monkeypatch
):
    spots = _labelled_world(world, root, dave, second_grader)
    monkeypatch.setattr(quality, "MIN_DOUBLE", 3)
    report = judge_quality()
    assert (report["labels"], report["double"]) == (4, 3)
    judge_a = next(j for j in report["judges"] if j["judge"] == "judge-a")
    overall = judge_a["groups"][0]
    assert (overall["by"], overall["pairs"], overall["exact"]) == ("all", 4, 1)
    assert overall["verdicts"]["meets"]["precision"] == 0.25
    tiers = {g["value"]: g for g in judge_a["groups"] if g["by"] == "tier"}
    assert sum(g["pairs"] for g in tiers.values()) == 4
    assert {g["by"] for g in judge_a["groups"]} == {"all", "tier", "domain", "stage"}
    # The people against each other on the three doubly graded pairs.
    firsts = [s for s in spots if s.double]
    assert report["people"][0]["pairs"] == 3
    # judge-a always says meets: its kappa with either person is 0; people's is above it.
    ceiling = judge_a["ceiling"]
    assert ceiling["judge_kappa"] == 0 and ceiling["double_pairs"] == len(firsts)
    assert ceiling["people_kappa"] > 0 and ceiling["as_good_as_a_second_person"] is False
    monkeypatch.setattr(quality, "MIN_DOUBLE", 4)
    assert judge_quality()["judges"][0]["ceiling"]["as_good_as_a_second_person"] is None
    calibration = {c["verdict"]: c for c in judge_a["calibration"]}
    assert calibration["contradicts"]["given"] == 0
    assert judge_quality("disagreement")["labels"] == 0
    assert judge_quality("audit")["labels"] == 4


def test_calibration_counts_what_people_said_to_the_judge_s_contradicts(world, root, dave):
    c = Judge.objects.create(name="judge-c")
    audit_draw(count=2, double_share=0, user=root, seed=1)
    spots = list(SpotCheck.objects.select_related("response", "check_row"))
    for spot, person in zip(spots, ["contradicts", "missing"], strict=True):
        verdict_record(judge=c, response=spot.response, check=spot.check_row, verdict="contradicts")
        spot_check_grade(spot_check_id=spot.pk, user=dave, verdict=person)
    judge_c = next(j for j in judge_quality()["judges"] if j["judge"] == "judge-c")
    contradicts = judge_c["calibration"][0]
    assert (contradicts["verdict"], contradicts["given"], contradicts["confirmed"]) == (
        "contradicts",
        2,
        1,
    )
    assert contradicts["rate"] == 0.5 and contradicts["people"]["missing"] == 1


def test_the_quality_page_its_exports_and_the_api(
    client, world, root, dave, second_grader, django_assert_num_queries
):
    client.force_login(dave)
    assert client.get(reverse("judge_quality")).status_code == 403
    client.force_login(root)
    with django_assert_num_queries(5):  # session, user, groups, labels (none), judges
        client.get(reverse("judge_quality"))
    _labelled_world(world, root, dave, second_grader)
    with django_assert_num_queries(6):  # and the judges' verdicts on the labelled pairs
        page = client.get(reverse("judge_quality")).content.decode()
    assert 'data-who="judge-a"' in page and 'data-testid="kappa-chart"' in page
    assert "not decided (3 of 30 doubly graded pairs)" in page
    assert "partially meets" in page and "partially_meets" not in page
    data = client.get(reverse("judge_quality"), {"format": "json", "source": "audit"}).json()
    api = APIClient()
    api.force_authenticate(root)
    assert api.get("/api/spot-checks/quality/", {"source": "audit"}).json() == data
    assert api.get("/api/spot-checks/quality/", {"source": "x"}).status_code == 400
    api.force_authenticate(dave)
    assert api.get("/api/spot-checks/quality/").status_code == 403
    rows = list(
        csv.DictReader(io.StringIO(client.get(reverse("judge_quality"), {"format": "csv"}).text))
    )
    assert rows[0]["who"] == "people" and rows[0]["by"] == "all" and rows[0]["pairs"] == "3"
    assert {r["who"] for r in rows} == {"people", "judge-a", "judge-b"}


def test_the_results_page_draws_the_audit_and_predicts_widths(
    client, world, root, dave, django_assert_num_queries
):
    client.force_login(root)
    with django_assert_num_queries(15):  # nothing graded: no verdicts read for the widths
        page = client.get(reverse("spot_check_results")).content.decode()
    assert "– (nothing graded yet)" in page
    client.post(
        reverse("spot_check_results"), {"kind": "audit", "count": "10", "double_percent": "20"}
    )
    assert SpotCheck.objects.filter(audit=True).count() == 10
    assert SpotCheck.objects.filter(double=True).count() == 2
    answer = client.post(
        reverse("spot_check_results"), {"kind": "audit", "count": "10", "double_percent": "200"}
    )
    assert answer.status_code == 302 and SpotCheck.objects.count() == 10
    _grade_all(dave, lambda s: "missing" if s.check_row.tier == "valuable" else "meets")
    # And the verdicts and per-tier counts of the graded pairs, whatever their number.
    with django_assert_num_queries(17):
        client.get(reverse("spot_check_results"))
    data = json.loads(client.get(reverse("spot_check_results"), {"format": "json"}).content)
    audit = data["audit"]
    assert audit["spread_from"] == "audit" and audit["boards"] == 2
    widths = [w["width"] for w in audit["widths"]]
    assert all(w > 0 for w in widths) and widths == sorted(widths, reverse=True)
    # Four times the pairs, half the width.
    assert widths[0] / widths[2] == pytest.approx((1000 / 200) ** 0.5)
    api = APIClient()
    api.force_authenticate(root)
    assert api.get("/api/spot-checks/audit/").json() == audit
