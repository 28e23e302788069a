"""One boundary for input: control characters, lone surrogates, over-long values, unsafe source
ids and malformed numbers are refused with a 400 (or a line-numbered import error) naming the
field, before the database sees them."""

import json
import re

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.images.importing import ImportProblems, manifest_parse
from annotation.models import Candidate, FinalQuestion, Image, Review
from annotation.review import services
from conftest import png_bytes
from core.errors import Conflict, InvalidInput
from core.http import DomainErrorMiddleware
from core.text import clean_int, clean_source_id, clean_text
from rubrics import services as rubric_services
from rubrics.models import RubricCheck, Stage
from rubrics.tests.conftest import make_question, sample_meta

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- the checks themselves --------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a\x00b", "a\x07", "\x1b[31m", "x\x7f", "a\x85y", "\ud800"])
def test_control_characters_and_lone_surrogates_are_refused(text):
    with pytest.raises(Exception, match="comment may not contain U\\+"):
        clean_text(text, "comment", limit=100)


def test_what_people_write_passes():
    text = (
        "Line one\nline two\twith a tab, \u200femoji \U0001f600, <script>, \u05e9\u05dc\u05d5\u05dd"
    )
    assert clean_text(f"  {text} ", "comment", limit=100) == text
    with pytest.raises(Exception, match="source may not contain U\\+000A"):
        clean_text("two\nlines", "source", limit=100, multiline=False)
    with pytest.raises(Exception, match="comment is longer than 10 characters"):
        clean_text("x" * 11, "comment", limit=10)


def test_a_name_may_not_hold_a_bidirectional_override_but_prose_may():
    for override in ("\u202e", "\u202a", "\u2066", "\u2069"):
        with pytest.raises(Exception, match=f"model may not contain U\\+{ord(override):04X}"):
            clean_text(f"gpt{override}5", "model", limit=100, multiline=False)
    assert clean_text("gpt\u200f5", "model", limit=100, multiline=False) == "gpt\u200f5"
    assert clean_text("a \u2067b\u2069", "comment", limit=100) == "a \u2067b\u2069"
    with pytest.raises(Exception, match="U\\+202D"):
        clean_text("a \u202db", "text", limit=100, bidi_controls=False)


@pytest.mark.parametrize("source_id", ["a/b", "a b", "a?b", "a#b", "..", ".", "é", "a\x00", ""])
def test_unsafe_source_ids_are_refused(source_id):
    with pytest.raises(Exception, match="source_id"):
        clean_source_id(source_id)


def test_safe_source_ids_pass():
    for source_id in ("img-1", "crag_mm:0001.v2", "A.b-C_d:9"):
        assert clean_source_id(source_id) == source_id
    with pytest.raises(Exception, match="longer than 200"):
        clean_source_id("a" * 201)


@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", " ", "9" * 30, True, 2.5])
def test_malformed_numbers_are_refused(value):
    with pytest.raises(Exception, match="after must be a whole number|after is required"):
        clean_int(value, "after")


def test_numbers_pass_with_their_bounds():
    assert clean_int(" 42 ", "after") == 42 and clean_int(7.0, "after") == 7
    assert clean_int("", "after", required=False) is None
    with pytest.raises(Exception, match="at least 1"):
        clean_int("0", "after", minimum=1)


# --- at the boundary of every request ---------------------------------------------------------


def test_a_nul_in_a_form_post_is_a_400_naming_the_field(alice, make_image):
    _, (candidate,) = make_image()
    response = logged_in(alice).post(
        reverse("review_submit", args=[candidate.pk]), {"decision": "accept", "comment": "fine\x00"}
    )
    assert response.status_code == 400
    assert "comment may not contain U+0000" in response.content.decode()
    assert not Review.objects.exists()


def test_a_nul_in_json_is_a_400_naming_the_field(alice, make_image):
    _, (candidate,) = make_image()
    response = api(alice).post(
        f"/api/candidates/{candidate.pk}/reviews/",
        {"decision": "accept", "comment": "fine\x00"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "comment"
    assert not Review.objects.exists()


def test_a_lone_surrogate_in_json_is_a_400(alice, make_image):
    _, (candidate,) = make_image()
    body = '{"decision": "revise", "revised_text": "What \\ud83d is this?"}'
    response = api(alice).post(
        f"/api/candidates/{candidate.pk}/reviews/", body, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["field"] == "revised_text"


def test_json_nested_thousands_deep_is_a_400(alice, make_image):
    _, (candidate,) = make_image()
    body = "[" * 100_000 + "]" * 100_000
    response = api(alice).post(
        f"/api/candidates/{candidate.pk}/reviews/", body, content_type="application/json"
    )
    assert response.status_code == 400


def test_control_characters_in_the_query_or_the_path_are_a_400(root):
    client = logged_in(root)
    response = client.get("/leaderboard/", {"judge": "x\x00"})
    assert response.status_code == 400 and "judge may not contain" in response.content.decode()
    assert client.get("/images/a%00b/").status_code == 400
    response = APIClient()
    response.force_authenticate(root)
    answer = response.get("/api/leaderboard/", {"judge": "x\x01"})
    assert answer.status_code == 400 and answer.json()["field"] == "judge"


def test_an_over_long_comment_is_a_400_naming_it(alice, make_image):
    _, (candidate,) = make_image()
    response = api(alice).post(
        f"/api/candidates/{candidate.pk}/reviews/",
        {"decision": "accept", "comment": "x" * 10_000},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "comment" and "5000" in response.json()["detail"]
    assert not Review.objects.exists()


def test_an_over_long_entity_correction_is_refused_and_nothing_changes(root, make_image):
    image, (candidate,) = make_image()
    question = FinalQuestion.objects.create(
        image=image, candidate=candidate, text=candidate.text, method="manual"
    )
    client = logged_in(root)
    response = client.post(
        reverse("question_correct", args=[question.pk]),
        {"field": "entity", "value": "x" * 501, "reason": "typo"},
        follow=True,
    )
    assert "The new value is longer than 500 characters (501 sent): shorten it." in (
        response.content.decode()
    )
    response = client.post(
        reverse("question_correct", args=[question.pk]),
        {"field": "drop", "reason": "bad\x1b"},
        follow=True,
    )
    assert "reason may not contain U+001B" in response.content.decode()
    image.refresh_from_db()
    question.refresh_from_db()
    assert image.entity == "Beef bourguignon" and question.dropped_at is None


def test_a_source_id_with_a_slash_is_a_line_numbered_import_error(tmp_path):
    (tmp_path / "a.png").write_bytes(png_bytes())
    lines = [
        json.dumps(
            {
                "source_id": sid,
                "image": "a.png",
                "entity": entity,
                "domain": "food",
                "popularity": "head",
            }
        )
        for sid, entity in (("ok-1", "Cat"), ("bad/one", "Cat"), ("ok-2", "C\x00t"))
    ]
    with pytest.raises(ImportProblems) as info:
        manifest_parse(lines, tmp_path)
    assert info.value.problems == [
        "line 2: source_id may hold only letters, digits and - _ . : (not 'bad/one').",
        "line 3: entity may not contain U+0000 (a control character) at character 2.",
    ]
    assert not Image.objects.exists()


def test_a_domain_error_that_escapes_a_view_is_its_status_not_a_500():
    middleware = DomainErrorMiddleware(lambda request: None)
    page = middleware.process_exception(
        RequestFactory().post("/review/1/"), Conflict("taken", "candidate")
    )
    assert page.status_code == 409 and page.content == b"taken"
    answer = middleware.process_exception(RequestFactory().post("/api/x/"), Conflict("taken"))
    assert answer.status_code == 409 and json.loads(answer.content) == {"detail": "taken"}
    assert middleware.process_exception(RequestFactory().get("/"), ValueError()) is None


# --- the workspace's numbers -------------------------------------------------------------------


@pytest.fixture
def draft(dave):
    rubric_services.rubric_version_create(
        question=make_question(), meta_document=sample_meta(), stage=Stage.LLM_REFINED_1
    )
    return rubric_services.revision_claim(user=dave)


@pytest.mark.parametrize(
    ("field", "value"),
    [("after", "abc"), ("after", "1.5"), ("revision", "abc"), ("revision", "9" * 25)],
)
def test_malformed_numbers_in_a_workspace_post_are_a_400(client, dave, draft, field, value):
    client.force_login(dave)
    data = {
        "text": "The answer names the dish.",
        "tier": "valuable",
        "revision": draft.revision,
        field: value,
    }
    before = RubricCheck.objects.count()
    response = client.post(reverse("rubric_check_add", args=[draft.pk]), data, **HTMX)
    assert response.status_code == 400
    assert f"{field} must be" in response.content.decode()
    plain = client.post(reverse("rubric_check_add", args=[draft.pk]), data, follow=True)
    assert plain.status_code == 200 and f"{field} must be" in plain.content.decode()
    assert RubricCheck.objects.count() == before


def test_an_over_long_delete_reason_is_refused(client, dave, draft):
    client.force_login(dave)
    row = draft.checks.order_by("position").first()
    response = client.post(
        reverse("rubric_check_delete", args=[draft.pk, row.pk]),
        {"reason": "x" * 2001, "revision": draft.revision},
        **HTMX,
    )
    assert response.status_code == 400
    assert "The reason is longer than 2,000 characters (2,001 sent): shorten it." in (
        response.content.decode()
    )
    row.refresh_from_db()
    assert row.deleted_at is None


def test_review_services_refuse_a_nul_themselves(alice, make_image):
    """The services are a boundary too: commands and tasks call them without a request."""
    _, (candidate,) = make_image()
    with pytest.raises(InvalidInput, match="The revised question may not contain"):
        services.review_submit(
            user=alice, candidate_id=candidate.pk, decision="revise", revised_text="What\x00 is it?"
        )
    assert Candidate.objects.get().reviews.count() == 0


# --- a text over every field's limit, refused before the view, in the page's words ----------

TOO_LONG = "A text you sent is longer than 20,000 characters (20,001 sent): shorten it."


def test_an_over_long_form_field_is_refused_in_plain_words_and_kept(alice, make_image):
    """The backstop under every field's own limit: no form key on the page, and what was typed
    comes back on the refusal page (a plain post) or stays where it was (htmx)."""
    from annotation.tests.test_pages import RAW_KEY, visible_text

    _, (candidate,) = make_image()
    client = logged_in(alice)
    typed = "Which dish is this? " + "x" * 19_981
    data = {"decision": "revise", "revised_text": typed}
    plain = client.post(reverse("review_submit", args=[candidate.pk]), data)
    assert plain.status_code == 400 and plain["Content-Type"].startswith("text/html")
    body = plain.content.decode()
    text = visible_text(body)
    assert TOO_LONG in text
    assert RAW_KEY.findall(text) == [] and "revised_text" not in text
    # What was typed, to copy back: in a read-only box, with the way back to the form.
    assert re.search(r"<textarea[^>]*readonly[^>]*>Which dish is this\? x{19981}</textarea>", body)
    assert 'href="/review/"' in body

    htmx = client.post(reverse("review_submit", args=[candidate.pk]), data, **HTMX)
    assert htmx.status_code == 400 and htmx["Content-Type"].startswith("text/plain")
    assert htmx.content.decode() == TOO_LONG
    # The page names the field by its own label (app.js): the response says which field.
    assert htmx["X-Refused-Field"] == "revised_text"
    assert not Review.objects.exists()


def test_an_over_long_json_value_is_the_apis_error_body(alice, make_image):
    _, (candidate,) = make_image()
    response = api(alice).post(
        f"/api/candidates/{candidate.pk}/reviews/",
        {"decision": "accept", "comment": "x" * 20_001},
        format="json",
    )
    assert response.status_code == 400
    # The API's sender names the value by its key, so the key is what the message says.
    assert response.json() == {
        "detail": "comment is longer than 20,000 characters (20,001 sent): shorten it.",
        "field": "comment",
    }
    assert not Review.objects.exists()
