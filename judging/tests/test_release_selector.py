"""Every results page, export and API answer says which release it scores (issue 25, section 1):
`?release=NAME`, `draft` for the working draft, by default the latest release. The demo's
symptom: after a human round the draft's scores turn pending, while a release cut before the
round keeps its scores."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from judging.models import EvaluatedModel, Judge, Response, ScoringConfig
from judging.releases.selectors import release_versions
from judging.releases.services import create_release
from judging.runs.views import JudgeForm
from judging.tests.conftest import add_checks, final_checks, make_question
from judging.verdicts.services import verdict_record
from llm.models import LLMModel
from rubrics.models import RubricVersion

pytestmark = pytest.mark.django_db

VERDICTS = ["meets", "partially_meets", "missing", "meets"]


def _judge(judge, response, offset=0):
    for i, check in enumerate(final_checks(response.question)):
        verdict_record(
            judge=judge,
            response=response,
            check=check,
            verdict=VERDICTS[(i + offset) % len(VERDICTS)],
            rationale=f"{judge.name} on {check.check_id}",
        )


def _human_round(question):
    """A new final version of the question's rubric with one more check, not yet judged."""
    version = RubricVersion.objects.create(
        rubric=question.rubric, stage="human_1", meta_rubric={}, frozen_at=timezone.now()
    )
    add_checks(
        version,
        ("answer_critical", "valuable", "context", "valuable"),
        texts={3: "Says where it comes from"},
    )
    return version


@pytest.fixture
def world(db):
    """Two judges (one can be called), two models, three questions judged in both settings,
    release v1.0 cut, then a human round on q0 (a fourth check, not judged yet)."""
    llm = LLMModel.objects.create(
        name="judge-llm",
        provider="gemini",
        model="gemini-2.5-pro",
        price_input_per_million=Decimal("1.00"),
        price_output_per_million=Decimal("10.00"),
    )
    judges = [
        Judge.objects.create(name="gemini-judge", llm_model=llm),
        Judge.objects.create(name="gpt-judge"),
    ]
    models = [EvaluatedModel.objects.create(name=n) for n in ("model-a", "model-b")]
    questions = [make_question(f"q{i}", domain=["food", "art"][i % 2]) for i in range(3)]
    for q, question in enumerate(questions):
        for m, model in enumerate(models):
            for setting in ("multimodal", "text_only"):
                response = Response.objects.create(
                    model=model, question=question, setting=setting, text=f"{model.name} answers"
                )
                for j, judge in enumerate(judges):
                    _judge(judge, response, offset=q + 2 * m + j)
    release = create_release("v1.0", "before the human round")
    _human_round(questions[0])
    return {"judges": judges, "models": models, "questions": questions, "release": release}


def _get(client, root, url, **params):
    client.force_login(root)
    return client.get(url, params)


def _json(client, root, url, **params):
    response = _get(client, root, url, **params, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _csv_rows(response) -> list[dict]:
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def _rows(board: dict) -> dict:
    return {r["model"]: r for r in board["rows"]}


# --- the demo's symptom: a release cut before a human round keeps its scores -----------------


def test_the_release_keeps_its_scores_while_the_draft_waits(client, root, world):
    url = reverse("leaderboard")
    on_release = _json(client, root, url, judge="gemini-judge", release="v1.0")
    on_draft = _json(client, root, url, judge="gemini-judge", release="draft")
    default = _json(client, root, url, judge="gemini-judge")
    assert default == on_release  # the latest release, when left out
    for model in ("model-a", "model-b"):
        assert _rows(on_release)[model]["scored"] == 3 and _rows(on_release)[model]["pending"] == 0
        assert _rows(on_draft)[model]["scored"] == 2 and _rows(on_draft)[model]["pending"] == 1
    assert on_release["release"] == {
        "name": "v1.0",
        "content_hash": world["release"].content_hash,
    }
    assert on_draft["release"] == "draft"


def test_the_page_names_the_release_and_says_what_waits_on_the_draft(client, root, world):
    url = reverse("leaderboard")
    body = _get(client, root, url, judge="gemini-judge").content.decode()
    assert re.search(r"<h1>Leaderboard <span class=\"small\">· v1.0</span></h1>", body)
    assert 'Scores of release <strong><a href="/releases/v1.0/">v1.0</a></strong>' in body
    assert world["release"].content_hash[:12] in body
    assert 'data-testid="rejudge"' not in body  # nothing waits on v1.0
    assert "<td>3 of 3</td>" in body

    body = _get(client, root, url, judge="gemini-judge", release="draft").content.decode()
    assert '<h1>Leaderboard <span class="small">· working draft</span></h1>' in body
    section = re.search(r'data-testid="rejudge">(.*?)</section>', body, re.S).group(1)
    assert "2 responses wait for gemini-judge's verdicts on the working draft" in section
    assert "The releases keep the scores of the rubric versions they froze." in section
    # q0's new version: four checks for each of the two answers, at most one call each
    assert "2 responses, at most 8 calls to <code>judge-llm</code>" in section
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]+)">', section))
    assert "judge-release" not in fields  # the draft: each question's final version


def test_the_selector_is_a_labelled_select_with_every_release_and_the_draft(client, root, world):
    create_release("v1.1")  # after the round: q0 on its new version
    body = _get(client, root, reverse("leaderboard")).content.decode()
    form = re.search(r'<form method="get"[^>]*data-testid="selector">(.*?)</form>', body, re.S)
    select = re.search(
        r"<label>Release <select name=\"release\"[^>]*>(.*?)</select></label>", form[1]
    )
    options = re.findall(r'<option value="([^"]+)"( selected)?>([^<]+)</option>', select[1])
    assert options == [
        ("v1.1", " selected", "v1.1 (latest)"),
        ("v1.0", "", "v1.0"),
        ("draft", "", "Working draft (live)"),
    ]
    assert '<button type="submit">Show</button>' in form[1]
    body = _get(client, root, reverse("leaderboard"), release="v1.0").content.decode()
    assert '<option value="v1.0" selected>v1.0</option>' in body
    # the exports of the page carry the release shown
    assert "?release=v1.0&amp;judge=gemini-judge&amp;setting=multimodal&amp;format=csv" in body


def test_a_release_freezes_its_scoring_parameters(client, root, world):
    ScoringConfig.objects.update_or_create(pk=1, defaults={"partial_credit": 0.25})
    url = reverse("results_question", args=["q1"])

    def score(release):
        data = _json(client, root, url, release=release)
        answer = next(r for r in data["responses"] if r["model"] == "model-a")
        return answer["scores"]["gemini-judge"]["gamut"]

    # the same verdicts on the same checks (one partially meets): λ 0.5 as frozen, 0.25 now
    assert score("v1.0") == pytest.approx(100 * (0.6 * 0.5 + 0.3 * 0 + 0.1 * 1))
    assert score("draft") == pytest.approx(100 * (0.6 * 0.25 + 0.3 * 0 + 0.1 * 1))
    url = reverse("leaderboard")
    body = _get(client, root, url, judge="gpt-judge", release="v1.0").content.decode()
    assert "Scoring (as release v1.0 froze it): λ = 0.5" in body
    body = _get(client, root, url, judge="gpt-judge", release="draft").content.decode()
    assert "Scoring: λ = 0.25" in body


def test_what_waits_on_a_release_has_its_estimate_and_launch(client, root, world):
    """A model added after the cut waits on the release's checks: the page counts it, gives
    the estimate on the release's versions, and its launch judges those versions."""
    newcomer = EvaluatedModel.objects.create(name="model-c")
    for question in world["questions"]:
        Response.objects.create(model=newcomer, question=question, setting="multimodal", text="c")
    body = _get(
        client, root, reverse("leaderboard"), judge="gemini-judge", release="v1.0"
    ).content.decode()
    section = re.search(r'data-testid="rejudge">(.*?)</section>', body, re.S).group(1)
    assert "3 responses wait for gemini-judge's verdicts on release v1.0" in section
    # v1.0 froze q0's first version: three checks a question, not the draft's four on q0
    assert "3 responses, at most 9 calls to <code>judge-llm</code>" in section
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]+)">', section))
    fields.pop("csrfmiddlewaretoken")
    assert fields["judge-release"] == "v1.0"
    form = JudgeForm(QueryDict(urlencode(fields)), prefix="judge")  # as the launch reads it
    assert form.is_valid(), form.errors
    assert form.cleaned_data["versions"] == release_versions(world["release"])


@pytest.mark.parametrize("n_releases", [1, 4])
@pytest.mark.parametrize("release", ["v1.0", "draft"])
def test_query_counts_do_not_grow_with_the_releases(
    client, root, world, n_releases, release, django_assert_num_queries
):
    for i in range(1, n_releases):
        create_release(f"v1.{i}")
    client.force_login(root)
    # Session, user, groups (the menu); the releases (one query, the selector's list too);
    # the draft reads today's scoring settings, a release has its own. The leaderboard:
    # the judges and one board (5); on the draft also the pending estimate (q0's new checks).
    # The analyses: one board per setting or per judge (judging/tests/test_analysis_pages.py).
    pages = {
        reverse("leaderboard"): {"v1.0": 10, "draft": 20},
        reverse("results_settings"): {"v1.0": 13, "draft": 14},
        reverse("results_judges"): {"v1.0": 16, "draft": 17},
        reverse("results_questions"): {"v1.0": 6, "draft": 6},
        reverse("results_question", args=["q0"]): {"v1.0": 10, "draft": 11},
    }
    for url, counts in pages.items():
        with django_assert_num_queries(counts[release]):
            assert client.get(url, {"release": release}).status_code == 200


# --- the exports ---------------------------------------------------------------------------


def test_every_csv_names_the_release(client, root, world):
    h = world["release"].content_hash
    exports = [
        (reverse("leaderboard"), {}, "leaderboard-gemini-judge-multimodal-v10.csv"),
        (
            reverse("leaderboard"),
            {"table": "comparisons"},
            "leaderboard-gemini-judge-multimodal-comparisons-v10.csv",
        ),
        (reverse("results_settings"), {}, "settings-gemini-judge-v10.csv"),
        (reverse("results_judges"), {"table": "scores"}, "judges-multimodal-scores-v10.csv"),
        (reverse("results_judges"), {"table": "confusion"}, "judges-multimodal-confusion-v10.csv"),
        (reverse("results_question", args=["q1"]), {}, "question-q1-v10.csv"),
    ]
    for url, params, filename in exports:
        response = _get(client, root, url, **params, release="v1.0", format="csv")
        assert f'filename="{filename}"' in response["Content-Disposition"], url
        rows = _csv_rows(response)
        assert rows, url
        assert {(r["release"], r["release_hash"]) for r in rows} == {("v1.0", h)}, url
        draft = _csv_rows(_get(client, root, url, **params, release="draft", format="csv"))
        assert {(r["release"], r["release_hash"]) for r in draft} == {("draft", "")}, url


def test_the_question_export_is_on_the_release_rubric(client, root, world):
    url = reverse("results_question", args=["q0"])
    on_release = _csv_rows(_get(client, root, url, release="v1.0", format="csv"))
    on_draft = _csv_rows(_get(client, root, url, release="draft", format="csv"))
    # v1.0: q0's first version, three checks judged by both judges for four answers
    assert {r["check_id"] for r in on_release} == {"C0", "C1", "C2"}
    assert len(on_release) == 4 * 3 * 2
    assert on_draft == []  # its new version has no verdict yet


# --- the analyses and the question page ------------------------------------------------------


def test_analyses_score_the_release(client, root, world):
    settings = _json(client, root, reverse("results_settings"), release="v1.0")
    assert settings["release"]["name"] == "v1.0" and settings["questions"] == 3
    assert {r["multimodal_scored"] for r in settings["rows"]} == {3}
    draft = _json(client, root, reverse("results_settings"), release="draft")
    assert draft["release"] == "draft" and {r["multimodal_scored"] for r in draft["rows"]} == {2}

    judges = _json(client, root, reverse("results_judges"), release="v1.0")
    # both judges judged every check of v1.0's versions: 2 models x 3 questions x 3 checks
    assert judges["confusion"]["total"] == 18
    assert all(None not in r["scores"].values() for r in judges["scores"])
    draft = _json(client, root, reverse("results_judges"), release="draft")
    assert draft["confusion"]["total"] == 12  # q0's new version has no verdict yet

    body = _get(client, root, reverse("results_judges"), release="v1.0").content.decode()
    assert "on the rubric versions release v1.0 froze." in body
    assert '<h1>Judges compared <span class="small">· v1.0</span></h1>' in body


def test_question_page_on_the_release_and_on_the_draft(client, root, world):
    url = reverse("results_question", args=["q0"])
    on_release = _json(client, root, url, release="v1.0")
    assert [c["check_id"] for c in on_release["checks"]] == ["C0", "C1", "C2"]
    assert on_release["rubric_version"]["stage"] == "imported"
    scores = {(r["model"], r["setting"]): r["scores"] for r in on_release["responses"]}
    assert scores[("model-a", "multimodal")]["gemini-judge"]["status"] == "scored"
    on_draft = _json(client, root, url, release="draft")
    assert [c["check_id"] for c in on_draft["checks"]] == ["C0", "C1", "C2", "C3"]
    scores = {(r["model"], r["setting"]): r["scores"] for r in on_draft["responses"]}
    assert scores[("model-a", "multimodal")]["gemini-judge"]["status"] == "pending"
    body = _get(client, root, url, release="v1.0").content.decode()
    assert "Rubric version frozen in release v1.0: imported" in body
    assert "Says where it comes from" not in body


def test_a_question_added_after_the_cut(client, root, world):
    make_question("q9")
    url = reverse("results_question", args=["q9"])
    page = _get(client, root, url)  # the latest release does not hold it
    body = page.content.decode()
    assert page.status_code == 200
    assert "q9 is not in release v1.0" in body and 'href="?release=draft"' in body
    assert _get(client, root, url, release="draft").status_code == 200
    assert _get(client, root, url, release="v1.0", format="json").status_code == 404
    api = APIClient()
    api.force_authenticate(root)
    response = api.get("/api/leaderboard/questions/q9/?release=v1.0")
    assert response.status_code == 404 and response.json()["field"] == "release"
    # the index of v1.0 lists its questions only; the draft's lists q9 too
    body = _get(client, root, reverse("results_questions"), release="v1.0").content.decode()
    assert "q9" not in body and "/leaderboard/questions/q0/?release=v1.0" in body
    body = _get(client, root, reverse("results_questions"), release="draft").content.decode()
    assert "/leaderboard/questions/q9/?release=draft" in body


def test_the_results_menu_keeps_the_release_chosen(client, root, world):
    body = _get(client, root, reverse("results_settings"), release="draft").content.decode()
    nav = re.search(r'data-testid="results-nav">(.*?)</nav>', body, re.S).group(1)
    for name in ("leaderboard", "results_judges", "results_questions"):
        assert f'href="{reverse(name)}?release=draft"' in nav


# --- an unknown release ----------------------------------------------------------------------


def test_an_unknown_release_is_refused(client, root, world):
    client.force_login(root)
    for url in (
        reverse("leaderboard"),
        reverse("results_settings"),
        reverse("results_judges"),
        reverse("results_questions"),
        reverse("results_question", args=["q0"]),
    ):
        for params in ({}, {"format": "json"}, {"format": "csv"}):
            response = client.get(url, {"release": "v9", **params})
            assert response.status_code == 404, (url, params)
            body = response.content.decode()
            assert 'data-testid="error-page"' in body, url
            assert "There is no release named &#x27;v9&#x27;" in body
    api = APIClient()
    api.force_authenticate(root)
    for endpoint in (
        "/api/leaderboard/",
        "/api/leaderboard/settings/",
        "/api/leaderboard/judges/",
        "/api/leaderboard/questions/q0/",
    ):
        response = api.get(endpoint, {"release": "v9"})
        assert response.status_code == 404, endpoint
        assert response.json() == {
            "detail": "There is no release named 'v9'. Leave the release out for the latest "
            "one, or give 'draft' for the working draft.",
            "field": "release",
        }


# --- the API ---------------------------------------------------------------------------------


def test_the_api_answers_as_the_pages_with_the_release(client, root, world):
    api = APIClient()
    api.force_authenticate(root)
    pairs = [
        (reverse("leaderboard"), "/api/leaderboard/"),
        (reverse("results_settings"), "/api/leaderboard/settings/"),
        (reverse("results_judges"), "/api/leaderboard/judges/"),
        (reverse("results_question", args=["q0"]), "/api/leaderboard/questions/q0/"),
    ]
    for page, endpoint in pairs:
        for release in ("v1.0", "draft", None):
            params = {"release": release} if release else {}
            from_api = api.get(endpoint, params).json()
            assert from_api == _json(client, root, page, **params), (endpoint, release)
            expected = (
                "draft"
                if release == "draft"
                else {
                    "name": "v1.0",
                    "content_hash": world["release"].content_hash,
                }
            )
            assert from_api["release"] == expected


def test_the_schema_documents_the_release(root):
    api = APIClient()
    api.force_authenticate(root)
    schema = api.get("/api/schema/", {"format": "json"}).json()
    for path in (
        "/api/leaderboard/",
        "/api/leaderboard/settings/",
        "/api/leaderboard/judges/",
        "/api/leaderboard/questions/{source_id}/",
    ):
        names = [p["name"] for p in schema["paths"][path]["get"]["parameters"]]
        assert "release" in names, path
    field = schema["components"]["schemas"]["Leaderboard"]["properties"]["release"]
    assert field["oneOf"][1] == {"type": "string", "enum": ["draft"]}


def test_a_release_name_with_spaces_and_brackets(client, root, world):
    create_release("v1.1 (demo)")
    body = _get(client, root, reverse("leaderboard")).content.decode()
    assert '<h1>Leaderboard <span class="small">· v1.1 (demo)</span></h1>' in body
    assert "?release=v1.1%20%28demo%29&amp;judge=gemini-judge" in body  # the export links
    response = _get(client, root, reverse("leaderboard"), release="v1.1 (demo)", format="csv")
    assert (
        'filename="leaderboard-gemini-judge-multimodal-v11-demo.csv"'
        in response["Content-Disposition"]
    )
    assert {r["release"] for r in _csv_rows(response)} == {"v1.1 (demo)"}


def test_the_judging_form_refuses_an_unknown_release(world):
    judge = world["judges"][0]
    form = JudgeForm(
        QueryDict(urlencode({"judge-judge": judge.pk, "judge-release": "v9"})), prefix="judge"
    )
    assert not form.is_valid() and "release" in form.errors
    form = JudgeForm(QueryDict(urlencode({"judge-judge": judge.pk})), prefix="judge")
    assert form.is_valid() and form.cleaned_data["versions"] is None  # the draft's
