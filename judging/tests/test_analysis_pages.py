"""The analysis pages and their API: who may see them, their figures against an independent
computation from the verdict rows, the exports, and pinned query counts."""

import csv
import io
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from judging.leaderboard.board import leaderboard
from judging.models import EvaluatedModel, Judge, Response, Verdict
from judging.tests.conftest import add_checks, final_checks, make_question
from judging.verdicts.services import verdict_record
from llm.models import LLMModel
from rubrics.models import RubricVersion

pytestmark = pytest.mark.django_db

CYCLE = ["meets", "partially_meets", "missing", "contradicts", "meets", "meets"]
WEIGHTS = {"answer_critical": 0.6, "valuable": 0.3, "context": 0.1}


def _verdict(judge_i: int, model_i: int, setting_i: int, question_i: int, check_i: int) -> str:
    """Deterministic and different per judge, model and setting; the first judge is kind to
    the first model (its own)."""
    if judge_i == 0 and model_i == 0:
        return "meets"
    return CYCLE[
        (question_i + 2 * model_i + check_i + judge_i * (model_i + 1) + 3 * setting_i) % len(CYCLE)
    ]


def _judge_all(judges, models, questions, *, skip=()):
    for qi, question in enumerate(questions):
        for mi, model in enumerate(models):
            for si, setting in enumerate(("multimodal", "text_only")):
                response = Response.objects.get(model=model, question=question, setting=setting)
                for ji, judge in enumerate(judges):
                    for ci, check in enumerate(final_checks(question)):
                        if (judge.name, model.name, setting, qi) in skip:
                            continue
                        verdict_record(
                            judge=judge,
                            response=response,
                            check=check,
                            verdict=_verdict(ji, mi, si, qi, ci),
                            rationale=f"{judge.name} on {check.check_id}",
                        )


@pytest.fixture
def world(db):
    return build_world()


def build_world() -> dict:
    """Two judges (gemini-judge runs the same LLM model as the evaluated model gemini), three
    models, four questions with three checks, both settings. Question q0 was revised: its
    first frozen version was judged too, then replaced by a second one."""
    llm = LLMModel.objects.create(name="gemini-pro", provider="gemini", model="gemini-2.5-pro")
    judges = [
        Judge.objects.create(name="gemini-judge", llm_model=llm),
        Judge.objects.create(name="gpt-judge"),
    ]
    models = [
        EvaluatedModel.objects.create(name="gemini", llm_model=llm),
        EvaluatedModel.objects.create(name="GPT"),
        EvaluatedModel.objects.create(name="claude"),
    ]
    questions = [make_question(f"q{i}", domain=["food", "art"][i % 2]) for i in range(4)]
    for question in questions:
        for model in models:
            for setting in ("multimodal", "text_only"):
                Response.objects.create(
                    model=model,
                    question=question,
                    setting=setting,
                    text=f"{model.name} answers {question.image.source_id}",
                )
    _judge_all(judges, models, questions)
    # q0 gets a second frozen version (with evidence), judged again: the first's verdicts stay
    # in the tables but must not count.
    rubric = questions[0].rubric
    v2 = RubricVersion.objects.create(
        rubric=rubric,
        stage="human_1",
        meta_rubric={
            "snippets": [
                {
                    "id": "s1",
                    "url": "https://example.org/beef",
                    "title": "Beef page",
                    "text": "Braised in red wine.",
                }
            ]
        },
        frozen_at=timezone.now(),
    )
    checks = add_checks(
        v2,
        ("answer_critical", "valuable"),
        texts={0: "Names the dish", 1: "Says it is braised in wine"},
    )
    checks[1].snippets = ["s1", "s9"]
    checks[1].save()
    # gpt-judge has not judged claude's text-only answer to q0 in the new version yet.
    _judge_all(judges, models, questions[:1], skip={("gpt-judge", "claude", "text_only", 0)})
    return {"judges": judges, "models": models, "questions": questions}


def _independent_gamut(judge, model, setting) -> float | None:
    """Gamut x100 of one model under one judge, straight from the verdict rows: per question,
    only its latest frozen version, only responses judged on every check."""
    values = []
    for question in make_questions():
        checks = final_checks(question)
        response = Response.objects.get(model=model, question=question, setting=setting)
        given = {
            v.check_row_id: v.verdict
            for v in Verdict.objects.filter(judge=judge, response=response)
        }
        if any(c.pk not in given for c in checks):
            continue
        total = weight = 0.0
        for tier, w in WEIGHTS.items():
            counts = Counter(given[c.pk] for c in checks if c.tier == tier)
            if not counts:
                continue
            m, p, s, c = (counts[k] for k in ("meets", "partially_meets", "missing", "contradicts"))
            total += w * (m + 0.5 * p - 2 * c) / (m + p + s + 2 * c)
            weight += w
        values.append(total / weight)
    return 100 * sum(values) / len(values) if values else None


def make_questions():
    from annotation.models import FinalQuestion

    return list(FinalQuestion.objects.order_by("id"))


def _pages():
    return [
        reverse("results_settings"),
        reverse("results_judges"),
        reverse("results_questions"),
        reverse("results_question", args=["q0"]),
    ]


def _apis():
    return [
        "/api/leaderboard/",
        "/api/leaderboard/settings/",
        "/api/leaderboard/judges/",
        "/api/leaderboard/questions/q0/",
    ]


# --- who may see them ------------------------------------------------------------------------


def test_pages_are_for_admins_only(client, world, alice, mallory, root):
    for url in _pages():
        assert client.get(url).status_code == 302, url  # to the login page
        for format_ in ("", "json", "csv"):
            assert client.get(url, {"format": format_}).status_code == 302
    for person in (alice, mallory):
        client.force_login(person)
        for url in _pages():
            for format_ in ("", "json", "csv"):
                assert client.get(url, {"format": format_}).status_code == 403, (url, person)
    client.force_login(root)
    for url in _pages():
        assert client.get(url).status_code == 200, url


def test_api_is_for_admins_only(world, alice, mallory, root):
    anonymous = APIClient()
    for url in _apis():
        assert anonymous.get(url).status_code == 401, url
    for person in (alice, mallory):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=person)[1]}")
        for url in _apis():
            response = client.get(url)
            assert response.status_code == 403, (url, person)
            assert response.json()["detail"] == "Only admins read the results."
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=root)[1]}")
    for url in _apis():
        assert client.get(url).status_code == 200, url
    session = APIClient()
    session.force_login(root)
    assert session.get(_apis()[1]).status_code == 200


def test_leaderboard_links_to_the_analysis_pages(client, root, world):
    client.force_login(root)
    body = client.get(reverse("leaderboard")).content.decode()
    for name in ("results_settings", "results_judges", "results_questions"):
        assert f'href="{reverse(name)}"' in body


# --- multimodal against text-only ------------------------------------------------------------


def test_settings_figures_against_the_verdict_rows(client, root, world):
    client.force_login(root)
    judge = world["judges"][1]
    data = client.get(reverse("results_settings"), {"judge": judge.name, "format": "json"}).json()
    assert data["judge"] == "gpt-judge" and data["questions"] == 4
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == {"gemini", "GPT", "claude"}
    for model in world["models"]:
        mm = _independent_gamut(judge, model, "multimodal")
        text = _independent_gamut(judge, model, "text_only")
        row = rows[model.name]
        assert row["multimodal"] == pytest.approx(mm, abs=1e-3)
        assert row["text_only"] == pytest.approx(text, abs=1e-3)
        assert row["cost"] == pytest.approx(text - mm, abs=1e-3)
        assert row["multimodal_ci_low"] <= row["multimodal"] <= row["multimodal_ci_high"]
    # claude's text-only answer to q0 is pending under gpt-judge: three questions scored.
    assert rows["claude"]["text_only_scored"] == 3 and rows["claude"]["multimodal_scored"] == 4
    costs = [r["cost"] for r in data["rows"]]
    assert costs == sorted(costs, reverse=True)


def test_settings_page_table_chart_and_csv(client, root, world):
    client.force_login(root)
    url = reverse("results_settings")
    page = client.get(url, {"judge": "gpt-judge"})
    body = page.content.decode()
    assert 'data-testid="settings"' in body
    assert body.count('aria-label="multimodal ') == 3 and body.count('aria-label="text-only ') == 3
    assert "<script>" not in body and "style=" not in body
    data = client.get(url, {"judge": "gpt-judge", "format": "json"}).json()
    response = client.get(url, {"judge": "gpt-judge", "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    # The release it scores (none cut: the working draft) in the file name and every row.
    assert 'filename="settings-gpt-judge-draft.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["model"] for r in rows] == [r["model"] for r in data["rows"]]
    assert {(r["release"], r["release_hash"]) for r in rows} == {("draft", "")}
    assert float(rows[0]["cost"]) == pytest.approx(data["rows"][0]["cost"])
    # An unknown judge falls back to the first, as on the leaderboard.
    assert client.get(url, {"judge": "nobody", "format": "json"}).json()["judge"] == "gemini-judge"


def _leaderboard_queries(judge, setting="multimodal") -> int:
    """What one leaderboard costs (judging/leaderboard/board.py pins its own count)."""
    with CaptureQueriesContext(connection) as queries:
        leaderboard(judge=judge, setting=setting)
    return len(queries)


def _page_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def _results_world(n_models: int, n_judges: int) -> list[Judge]:
    judges = [Judge.objects.create(name=f"j{i}") for i in range(n_judges)]
    question = make_question("q1")
    for m in range(n_models):
        model = EvaluatedModel.objects.create(name=f"m{m}")
        for setting in ("multimodal", "text_only"):
            response = Response.objects.create(
                model=model, question=question, setting=setting, text="x"
            )
            for judge in judges:
                for check in final_checks(question):
                    verdict_record(judge=judge, response=response, check=check, verdict="meets")
    return judges


# the session, the user and their groups (the menu's roles); then the page's own
FIXED = 3


@pytest.mark.parametrize("n_models", [1, 4])
def test_settings_page_query_count(client, root, n_models):
    [judge] = _results_world(n_models, 1)
    client.force_login(root)
    # the releases (for the selector), the judges, the scoring settings, then one
    # leaderboard per setting, whatever the number of models
    expected = FIXED + 3 + 2 * _leaderboard_queries(judge)
    assert _page_queries(client, reverse("results_settings")) == expected
    assert expected <= 14


# --- judges compared -------------------------------------------------------------------------


def _independent_confusion(a, b, setting) -> Counter:
    """Pairs of verdicts of judges a and b on the same check row of each question's final
    version, straight from the rows."""
    final = {c.pk for q in make_questions() for c in final_checks(q)}
    theirs = {
        (v.response_id, v.check_row_id): v.verdict
        for v in Verdict.objects.filter(judge=b, response__setting=setting)
    }
    out: Counter = Counter()
    for v in Verdict.objects.filter(judge=a, response__setting=setting):
        key = (v.response_id, v.check_row_id)
        if v.check_row_id in final and key in theirs:
            out[(v.verdict, theirs[key])] += 1
    return out


def test_judges_figures_against_the_verdict_rows(client, root, world):
    client.force_login(root)
    gem, gpt = world["judges"]
    data = client.get(reverse("results_judges"), {"setting": "text_only", "format": "json"}).json()
    assert data["setting"] == "text_only" and data["judges"] == ["gemini-judge", "gpt-judge"]
    expected = {
        j.name: {m.name: _independent_gamut(j, m, "text_only") for m in world["models"]}
        for j in world["judges"]
    }
    for row in data["scores"]:
        for judge, score in row["scores"].items():
            assert score == pytest.approx(expected[judge][row["model"]], abs=1e-3)
        values = [expected[j][row["model"]] for j in expected]
        assert row["largest_difference"] == pytest.approx(max(values) - min(values), abs=1e-3)
    # Leniency: each judge's mean over the three models minus the other's.
    means = {j: sum(per.values()) / 3 for j, per in expected.items()}
    leniency = {r["judge"]: r["leniency"] for r in data["leniency"]}
    assert leniency["gemini-judge"] == pytest.approx(
        means["gemini-judge"] - means["gpt-judge"], abs=1e-3
    )
    assert leniency["gpt-judge"] == pytest.approx(-leniency["gemini-judge"], abs=1e-3)
    # Self-preference: gemini-judge and the model gemini share an LLM model; gpt-judge is
    # matched to GPT by its name (ignoring case).
    assert data["own_models"] == {"gemini-judge": ["gemini"], "gpt-judge": ["GPT"]}
    own = {r["judge"]: r for r in data["self_preference"]}
    gap = expected["gemini-judge"]["gemini"] - expected["gpt-judge"]["gemini"]
    assert own["gemini-judge"]["gap"] == pytest.approx(gap, abs=1e-3)
    assert own["gemini-judge"]["net"] == pytest.approx(gap - leniency["gemini-judge"], abs=1e-3)
    assert own["gemini-judge"]["own"] == 100.0  # every verdict meets
    # Rankings of the two judges.
    [pair] = data["rankings"]
    assert (pair["judge_a"], pair["judge_b"], pair["models"]) == ("gemini-judge", "gpt-judge", 3)
    assert -1 <= pair["tau"] <= 1
    # Confusion, default A and B: the first two judges by name.
    matrix = data["confusion"]
    assert (matrix["judge_a"], matrix["judge_b"]) == ("gemini-judge", "gpt-judge")
    counted = _independent_confusion(gem, gpt, "text_only")
    labels = matrix["labels"]
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            assert matrix["counts"][i][j] == counted[(a, b)], (a, b)
    # 4 questions x 3 models, 3 checks each (q0's new version has 2), less the pair not
    # judged by gpt-judge; the first version of q0 is not counted.
    assert matrix["total"] == sum(counted.values()) == 3 * 3 * 3 + 3 * 2 - 2


def test_confusion_of_chosen_judges_and_settings(client, root, world):
    client.force_login(root)
    gem, gpt = world["judges"]
    data = client.get(
        reverse("results_judges"),
        {"setting": "multimodal", "a": "gpt-judge", "b": "gemini-judge", "format": "json"},
    ).json()
    matrix = data["confusion"]
    assert (matrix["judge_a"], matrix["judge_b"]) == ("gpt-judge", "gemini-judge")
    counted = _independent_confusion(gpt, gem, "multimodal")
    assert matrix["total"] == sum(counted.values()) == 3 * 3 * 3 + 3 * 2
    assert matrix["counts"][0][0] == counted[("meets", "meets")]


def test_failed_verdicts_show_in_the_confusion_matrix(client, root, world):
    gem, gpt = world["judges"]
    response = Response.objects.get(
        model__name="claude", question__image__source_id="q0", setting="text_only"
    )
    check = final_checks(world["questions"][0])[0]
    verdict_record(judge=gpt, response=response, check=check, verdict="failed")
    client.force_login(root)
    data = client.get(reverse("results_judges"), {"setting": "text_only", "format": "json"}).json()
    matrix = data["confusion"]
    failed = matrix["labels"].index("failed")
    assert sum(row[failed] for row in matrix["counts"]) == 1
    assert matrix["graded"] == matrix["total"] - 1


def test_judges_page_tables_and_csv_exports(client, root, world):
    client.force_login(root)
    url = reverse("results_judges")
    body = client.get(url, {"setting": "multimodal"}).content.decode()
    for testid in ("judge-scores", "leniency", "rankings", "self-preference", "confusion"):
        assert f'data-testid="{testid}"' in body
    assert body.count('aria-label="gemini-judge ') == 3  # one bar per model and judge
    assert "<script>" not in body and "style=" not in body
    data = client.get(url, {"setting": "multimodal", "format": "json"}).json()
    tables = {}
    for table in ("scores", "leniency", "rankings", "self_preference", "confusion"):
        response = client.get(url, {"setting": "multimodal", "format": "csv", "table": table})
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        tables[table] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["model"] for r in tables["scores"]] == [r["model"] for r in data["scores"]]
    first = data["scores"][0]
    assert float(tables["scores"][0]["gpt-judge"]) == pytest.approx(first["scores"]["gpt-judge"])
    assert [r["judge"] for r in tables["leniency"]] == ["gemini-judge", "gpt-judge"]
    assert [r["judge_a_verdict"] for r in tables["confusion"]] == data["confusion"]["labels"]
    assert int(tables["confusion"][0]["meets"]) == data["confusion"]["counts"][0][0]
    assert tables["self_preference"][0]["model"] == "gemini"
    assert client.get(url, {"format": "csv", "table": "nope"}).status_code == 400


def test_judges_page_with_one_judge(client, root, judge, respond):
    question = make_question("q1")
    response = respond(question)
    for check in final_checks(question):
        verdict_record(judge=judge, response=response, check=check, verdict="meets")
    client.force_login(root)
    body = client.get(reverse("results_judges")).content.decode()
    assert "Leniency needs at least two judges" in body
    assert "The confusion matrix needs two judges" in body
    data = client.get(reverse("results_judges"), {"format": "json"}).json()
    assert data["confusion"] is None and data["leniency"] == [] and data["rankings"] == []


def test_pages_without_judges(client, root):
    client.force_login(root)
    for name in ("results_settings", "results_judges"):
        url = reverse(name)
        assert "No judge has been set up yet" in client.get(url).content.decode()
        assert client.get(url, {"format": "json"}).status_code == 404
    assert APIClient().get("/api/leaderboard/judges/").status_code == 401
    api = APIClient()
    api.force_authenticate(root)
    assert api.get("/api/leaderboard/judges/").status_code == 404


@pytest.mark.parametrize(("n_models", "n_judges"), [(1, 2), (4, 2), (4, 3)])
def test_judges_page_query_count(client, root, n_models, n_judges):
    judges = _results_world(n_models, n_judges)
    client.force_login(root)
    # the releases (for the selector), the judges (for the form, then for the report), one
    # leaderboard per judge, the evaluated models (self-preference), one aggregate for the
    # confusion matrix and the scoring settings: nothing grows with the models or the verdicts
    expected = FIXED + 3 + n_judges * _leaderboard_queries(judges[0]) + 3
    assert _page_queries(client, reverse("results_judges")) == expected
    assert expected <= 9 + 4 * n_judges


# --- one question ----------------------------------------------------------------------------


def test_question_page_shows_checks_evidence_responses_and_verdicts(client, root, world):
    client.force_login(root)
    response = client.get(reverse("results_question", args=["q0"]))
    body = response.content.decode()
    assert 'src="http://testserver/images/q0/photo"' in body
    assert "What is this dish?" in body and "Beef bourguignon" in body
    # The final version's two checks, with tiers and the evidence behind the second.
    assert "Names the dish" in body and "Says it is braised in wine" in body
    assert "check 2" not in body  # the first version's third check
    assert "Braised in red wine." in body and "https://example.org/beef" in body
    assert "Cited but not in the meta-rubric: s9" in body
    assert body.count('data-testid="response"') == 6  # 3 models x 2 settings
    assert "GPT answers q0" in body
    assert "gemini-judge on C1" in body  # a rationale
    assert "<script>" not in body and "style=" not in body


def test_question_json_csv_and_scores(client, root, world):
    client.force_login(root)
    url = reverse("results_question", args=["q0"])
    data = client.get(url, {"format": "json"}).json()
    assert data["image_url"] == "http://testserver/images/q0/photo"
    assert [c["check_id"] for c in data["checks"]] == ["C0", "C1"]
    assert data["checks"][1]["evidence"] == [
        {
            "id": "s1",
            "url": "https://example.org/beef",
            "title": "Beef page",
            "text": "Braised in red wine.",
        }
    ]
    assert data["rubric_version"]["stage"] == "human_1"
    by = {(r["model"], r["setting"]): r for r in data["responses"]}
    assert len(by) == 6
    gemini = by[("gemini", "multimodal")]
    assert gemini["scores"]["gemini-judge"] == {"status": "scored", "gamut": 100.0}
    pending = by[("claude", "text_only")]
    assert pending["scores"]["gpt-judge"] == {"status": "pending", "gamut": None}
    assert pending["verdicts"][0]["judges"].keys() == {"gemini-judge"}
    # Every shown verdict is the row's verdict on the final version's check.
    for r in data["responses"]:
        for entry in r["verdicts"]:
            for judge, v in entry["judges"].items():
                row = Verdict.objects.get(
                    judge__name=judge,
                    response__model__name=r["model"],
                    response__setting=r["setting"],
                    response__question__image__source_id="q0",
                    check_row__check_id=entry["check_id"],
                    check_row__version__stage="human_1",
                )
                assert (v["verdict"], v["rationale"]) == (row.verdict, row.rationale)
    response = client.get(url, {"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 6 * 2 * 2 - 2  # responses x checks x judges, less the pending pair
    assert set(rows[0]) == {
        "setting",
        "model",
        "check_id",
        "tier",
        "check",
        "judge",
        "verdict",
        "rationale",
        "release",
        "release_hash",
    }


def test_question_page_failed_verdict_and_missing_rubric(client, root, world):
    gem = world["judges"][0]
    response = Response.objects.get(
        model__name="claude", question__image__source_id="q0", setting="text_only"
    )
    check = final_checks(world["questions"][0])[0]
    Verdict.objects.filter(judge=gem, response=response, check_row=check).delete()
    verdict_record(judge=gem, response=response, check=check, verdict="failed")
    client.force_login(root)
    data = client.get(reverse("results_question", args=["q0"]), {"format": "json"}).json()
    outcome = next(
        r for r in data["responses"] if (r["model"], r["setting"]) == ("claude", "text_only")
    )
    assert outcome["scores"]["gemini-judge"]["status"] == "failed"
    assert client.get(reverse("results_question", args=["nope"])).status_code == 404


def test_question_without_a_rubric(client, root, respond):
    from annotation.models import Candidate, CandidateStatus, FinalQuestion, Image

    image = Image.objects.create(
        source_id="q1",
        file="images/q1.png",
        entity="Falcon 9",
        domain="vehicles",
        popularity="torso",
    )
    candidate = Candidate.objects.create(
        image=image, text="What rocket is this?", origin="import", status=CandidateStatus.ACCEPTED
    )
    question = FinalQuestion.objects.create(
        image=image, candidate=candidate, text=candidate.text, method="manual"
    )
    respond(question)
    client.force_login(root)
    body = client.get(reverse("results_question", args=["q1"])).content.decode()
    assert "No frozen rubric version yet" in body and "It is beef bourguignon." in body
    data = client.get(reverse("results_question", args=["q1"]), {"format": "json"}).json()
    assert data["rubric_version"] is None and data["checks"] == []
    assert data["responses"][0]["verdicts"] == []


@pytest.mark.parametrize("n_models", [1, 5])
def test_question_page_query_count_is_constant(client, root, n_models, django_assert_num_queries):
    _results_world(n_models, 2)
    client.force_login(root)
    # the releases (for the selector), the question, its final version, its checks, the
    # judges, the responses, the verdicts, the scoring settings
    with django_assert_num_queries(FIXED + 8):
        response = client.get(reverse("results_question", args=["q1"]))
    assert response.content.decode().count('data-testid="response"') == 2 * n_models


def test_questions_index_lists_and_finds(client, root, world, django_assert_max_num_queries):
    client.force_login(root)
    # the releases (for the selector), the page's questions and their count
    with django_assert_max_num_queries(FIXED + 3):
        body = client.get(reverse("results_questions")).content.decode()
    for i in range(4):
        assert f'href="{reverse("results_question", args=[f"q{i}"])}"' in body
    body = client.get(reverse("results_questions"), {"q": "q2"}).content.decode()
    assert reverse("results_question", args=["q2"]) in body
    assert reverse("results_question", args=["q1"]) not in body


# --- the API ---------------------------------------------------------------------------------


def test_api_answers_the_pages_json(client, root, world):
    client.force_login(root)
    api = APIClient()
    api.force_authenticate(root)
    pairs = [
        (reverse("results_settings"), "/api/leaderboard/settings/", {"judge": "gpt-judge"}),
        (
            reverse("results_judges"),
            "/api/leaderboard/judges/",
            {"setting": "text_only", "a": "gpt-judge", "b": "gemini-judge"},
        ),
        (reverse("results_question", args=["q0"]), "/api/leaderboard/questions/q0/", {}),
        (
            reverse("leaderboard"),
            "/api/leaderboard/",
            {"judge": "gpt-judge", "setting": "text_only"},
        ),
    ]
    for page, endpoint, params in pairs:
        from_page = client.get(page, {**params, "format": "json"}).json()
        from_api = api.get(endpoint, params).json()
        assert from_api == from_page, endpoint


def test_api_refuses_unknown_names(world, root):
    api = APIClient()
    api.force_authenticate(root)
    response = api.get("/api/leaderboard/settings/", {"judge": "nobody"})
    assert response.status_code == 400 and response.json()["field"] == "judge"
    response = api.get("/api/leaderboard/judges/", {"setting": "audio"})
    assert response.status_code == 400 and response.json()["field"] == "setting"
    response = api.get("/api/leaderboard/judges/", {"b": "nobody"})
    assert response.status_code == 400 and response.json()["field"] == "b"
    assert api.get("/api/leaderboard/questions/nope/").status_code == 404


def test_api_is_in_the_openapi_schema(root):
    api = APIClient()
    api.force_authenticate(root)
    text = api.get("/api/schema/").content.decode()
    for path in (
        "/api/leaderboard/:",
        "/api/leaderboard/settings/:",
        "/api/leaderboard/judges/:",
        "/api/leaderboard/questions/{source_id}/:",
    ):
        assert path in text
    for name in ("JudgesReport", "SettingsReport", "QuestionReport", "Confusion"):
        assert name in text


def test_reports_take_the_benchmark_scoring_settings(judge, respond):
    from judging.leaderboard import reports
    from judging.verdicts.scoring import ScoringSettings

    question = make_question("q1", tiers=("answer_critical",))
    response = respond(question)
    verdict_record(
        judge=judge, response=response, check=final_checks(question)[0], verdict="partially_meets"
    )
    scoring = ScoringSettings(lambda_=0.25)
    data = reports.question_report(question, image_url="/x", scoring=scoring)
    assert data["responses"][0]["scores"]["gemini-judge"] == {"status": "scored", "gamut": 25.0}
    row = reports.settings_report(judge, scoring=scoring)["rows"][0]
    assert row["multimodal"] == pytest.approx(25.0)
    scores = reports.judges_report(setting="multimodal", scoring=scoring)["scores"]
    assert scores[0]["scores"]["gemini-judge"] == pytest.approx(25.0)
