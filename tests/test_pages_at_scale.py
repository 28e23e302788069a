"""The pages that were slow at full size (issue 24, section 6) make as many queries for twice
the data: each test counts a page's queries, doubles the questions (and so the checks,
responses, verdicts or events), and counts again. The figures at full size are in
bench/README.md ("Every page at full size")."""

from __future__ import annotations

import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import AuditEvent, Candidate, CandidateStatus, FinalQuestion
from judging.checks.info import (
    DISAGREED,
    MET_BY_ALL,
    MET_BY_NONE,
    check_information,
    rest_scores,
)
from judging.checks.report import check_report
from judging.leaderboard.board import leaderboard
from judging.models import (
    CheckAgreement,
    CheckVerdictCount,
    EvaluatedModel,
    Judge,
    Response,
    Verdict,
)
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import Given, check_tallies_rebuild, verdicts_record
from rubrics import services as rubric_services
from rubrics.exporting import export_to_zip
from rubrics.models import Stage
from rubrics.tests.test_compiler import document, fact, flexible

MODELS = ("m1", "m2", "m3")
TIERS = ("answer_critical", "answer_critical", "valuable", "context")


def api_as(user) -> APIClient:
    """A client authenticated as a fresh copy of `user` (no groups cached from a request
    before)."""
    api = APIClient()
    api.force_authenticate(type(user).objects.get(pk=user.pk))
    return api


def queries(client, url: str, **params) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
        assert response.status_code == 200, response.content[:300]
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    return len(captured)


# --- the check report and the leaderboard's analysis pages ------------------------------------


def judged_questions(start: int, count: int) -> None:
    """`count` questions, three models each, judged by two judges in the multimodal setting:
    C0 met by every model, C1 by none, C2 by the first two models; C3 as C2, except that on
    the first question of each batch the second judge says the opposite of the first on every
    response (a disagreement far above the rest, on a check with a spread: the report then
    needs the leaderboard for its discrimination)."""
    judges = [Judge.objects.get_or_create(name=name)[0] for name in ("judge-a", "judge-b")]
    for n in range(start, start + count):
        question = make_question(f"s{n:03d}", tiers=TIERS)
        checks = final_checks(question)
        for i, name in enumerate(MODELS):
            model, _ = EvaluatedModel.objects.get_or_create(name=name)
            response = Response.objects.create(
                model=model, question=question, setting="multimodal", text="x"
            )
            mixed = "meets" if i < 2 else "missing"
            mine = ["meets", "missing", mixed, mixed]
            for j, judge in enumerate(judges):
                given = list(mine)
                if j == 1 and n == start:
                    given[3] = "missing" if mixed == "meets" else "meets"
                verdicts_record(
                    judge=judge,
                    response=response,
                    given=[Given(c.pk, v) for c, v in zip(checks, given, strict=True)],
                )


def test_the_counts_agree_with_the_verdict_rows(db):
    """The report reads the per-check counts that verdicts_record keeps; every figure is the
    one info.check_information computes from the verdict rows themselves, and the counts are
    those that check_tallies_rebuild writes from the verdicts."""
    judged_questions(0, 6)
    judge = Judge.objects.get(name="judge-a")
    report = check_report(judge, "multimodal", flagged_only=False)
    board = leaderboard(judge=judge, setting="multimodal")
    rest = rest_scores(
        board.scores, board.question_ids, dict(EvaluatedModel.objects.values_list("name", "id"))
    )
    graded = list(
        Verdict.objects.filter(judge=judge).values_list(
            "check_row_id", "response__question_id", "response__model_id", "verdict"
        )
    )
    judged = list(Verdict.objects.values_list("check_row_id", "response_id", "judge_id", "verdict"))
    by_rows = {i.check: i for i in check_information(graded, rest, judged)}
    assert report["checks"] == len(by_rows) == 24
    assert report["flagged"] == sum(1 for i in by_rows.values() if i.flags) == 13
    for row in report["rows"]:
        check = (
            Verdict.objects.filter(check_row__check_id=row["check_id"])
            .filter(check_row__version__rubric__question__image__source_id=row["source_id"])[0]
            .check_row_id
        )
        info = by_rows[check]
        assert (
            row["models"],
            row["difficulty"],
            row["discrimination"],
            row["disagreement"],
            row["shared"],
            row["flags"],
        ) == (
            info.models,
            info.difficulty,
            info.discrimination,
            info.disagreement,
            info.shared,
            info.flags,
        )
    flags = {(r["source_id"], r["check_id"]): r["flags"] for r in report["rows"]}
    assert flags[("s000", "C0")] == [MET_BY_ALL] and flags[("s000", "C1")] == [MET_BY_NONE]
    assert flags[("s000", "C3")] == [DISAGREED] and flags[("s001", "C3")] == []
    kept = tallies()
    assert check_tallies_rebuild() == (48, 24)
    assert tallies() == kept


def tallies() -> list[tuple]:
    return sorted(
        [
            *CheckVerdictCount.objects.values_list(
                "judge_id", "check_row_id", "setting", "meets", "partially", "missing", "failed"
            ),
            *CheckAgreement.objects.filter(shared__gt=0).values_list(
                "check_row_id", "setting", "shared", "differing"
            ),
        ],
        key=repr,
    )


def test_a_failed_verdict_replaced_and_a_third_judge_move_the_counts(db):
    """verdicts_record's count changes, against the rebuild from the rows: a failed verdict
    replaced by a real one, and a third judge joining agreeing judges (shared stays, and a
    different verdict makes the response differing)."""
    judged_questions(0, 1)
    question = FinalQuestion.objects.get()
    checks = final_checks(question)
    third = Judge.objects.create(name="judge-c")
    response = Response.objects.get(model__name="m1")
    verdicts_record(judge=third, response=response, given=[Given(checks[0].pk, "failed")])
    verdicts_record(judge=third, response=response, given=[Given(checks[0].pk, "missing")])
    verdicts_record(judge=third, response=response, given=[Given(checks[1].pk, "missing")])
    agreement = CheckAgreement.objects.get(check_row=checks[0], setting="multimodal")
    assert (agreement.shared, agreement.differing) == (3, 1)
    assert CheckVerdictCount.objects.get(judge=third, check_row=checks[0]).missing == 1
    kept = tallies()
    check_tallies_rebuild()
    assert tallies() == kept


@pytest.fixture
def reviser_client(client, dave):
    client.force_login(dave)
    return client


def test_flagged_checks_and_history_queries_do_not_grow(reviser_client, dave):
    judged_questions(0, 4)
    history = reverse(
        "rubric_history", args=[FinalQuestion.objects.get(image__source_id="s000").rubric.pk]
    )
    pages = {
        "page": lambda: queries(reviser_client, reverse("flagged_checks")),
        "json": lambda: queries(reviser_client, reverse("flagged_checks"), format="json"),
        "csv": lambda: queries(reviser_client, reverse("flagged_checks"), format="csv"),
        "api": lambda: queries(api_as(dave), reverse("api_flagged_checks")),
        "history": lambda: queries(reviser_client, history),
    }
    before = {name: count() for name, count in pages.items()}
    judged_questions(4, 4)
    assert {name: count() for name, count in pages.items()} == before
    # The session, the user and their groups (not through the API, which authenticates
    # otherwise), the judges (the API: the one asked for); the report's eleven: the scoring
    # settings, the checks two judges graded, the judge's count of checks, those that may be
    # flagged, then for the disagreed check (it has a spread, so a discrimination) the
    # leaderboard's four, the models and the judge's verdicts on it, and the flagged checks'
    # texts. The history adds the rubric, its versions and its audits.
    assert before == {"page": 15, "json": 15, "csv": 15, "api": 13, "history": 18}
    report = reviser_client.get(reverse("flagged_checks"), {"format": "json"}).json()
    assert (report["checks"], report["flagged"]) == (32, 18)


def test_leaderboard_settings_and_judges_pages_queries_do_not_grow(client, root):
    judged_questions(0, 4)
    client.force_login(root)
    pages = {
        "settings": lambda: queries(client, reverse("results_settings")),
        "judges": lambda: queries(client, reverse("results_judges")),
    }
    before = {name: count() for name, count in pages.items()}
    judged_questions(4, 4)
    assert {name: count() for name, count in pages.items()} == before
    # as test_analysis_pages.py counts them: two leaderboards, or one per judge and the
    # confusion matrix, and the release the page scores (?release=, the latest by default)
    assert before == {"settings": 13, "judges": 17}


# --- the benchmark export ---------------------------------------------------------------------


def exported_questions(make_image, start: int, count: int) -> None:
    meta = document(fact(snippets=["s1", "s2"]), flexible("I3"))
    for n in range(start, start + count):
        image, _ = make_image(f"e{n:03d}", texts=[])
        candidate = Candidate.objects.create(
            image=image, text="What is this?", origin="import", status=CandidateStatus.ACCEPTED
        )
        question = FinalQuestion.objects.create(
            image=image, candidate=candidate, text=candidate.text, method="manual"
        )
        rubric_services.rubric_version_create(
            question=question, meta_document=meta, stage=Stage.IMPORTED, made_by_model="import"
        )


def export_queries() -> int:
    with CaptureQueriesContext(connection) as captured:
        export_to_zip(io.BytesIO())
    return len(captured)


def test_benchmark_export_queries_do_not_grow(make_image, root):
    exported_questions(make_image, 0, 3)
    before = export_queries()
    exported_questions(make_image, 3, 3)
    assert export_queries() == before
    # the questions with their images and rubrics, the rubrics' final versions, their checks
    # (one query per 500 versions); the Export page's job writes it so (test_export_jobs.py)
    assert before == 3


# --- the audit events in the admin -------------------------------------------------------------


def audit_events(make_image, alice, count: int) -> None:
    for n in range(count):
        image, [candidate] = make_image(f"a{AuditEvent.objects.count()}-{n}")
        AuditEvent.objects.create(actor=alice, action="review", candidate=candidate, image=image)
        AuditEvent.objects.create(actor=None, action="import", image=image)


def test_audit_event_admin_list_queries_do_not_grow(client, root, alice, make_image):
    root.is_superuser = True  # Django's admin asks for model permissions
    root.save()
    client.force_login(root)
    url = "/admin/annotation/auditevent/"
    audit_events(make_image, alice, 5)
    before = queries(client, url)
    audit_events(make_image, alice, 10)
    assert queries(client, url) == before
    # the session, the user, the count and the page of events with their people,
    # candidates and images (and the admin's own: its filter's actions, the permissions)
    assert before == 9
