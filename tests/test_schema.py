"""The OpenAPI schema is the contract: every operation documents the statuses that the layers
around every view can answer, with the one Error body, and those answers are JSON."""

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

from tests.schema_match import response_mismatches

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(root):
    client = APIClient()
    client.force_authenticate(root)
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_every_operation_documents_the_refusals_around_it(schema):
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"400", "401", "403", "404", "406"} <= codes, (method, path, codes)
            if "requestBody" in operation:
                assert "415" in codes, (method, path)


@override_settings(DEBUG=False)
def test_an_api_address_that_matches_no_route_answers_json(root):
    client = Client()
    client.force_login(root)
    response = client.get("/api/candidates/abc/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


# --- answers rendered through their serializers match what the schema says -----------------


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_review_and_adjudication_answers_match_the_schema(schema, alice, bob, carol, make_image):
    _, (candidate,) = make_image(texts=["What is this?"])
    answers = [
        ("/api/review/claim/", "post", _api(alice).post("/api/review/claim/")),
        (
            "/api/candidates/{candidate_id}/reviews/",
            "post",
            _api(alice).post(
                f"/api/candidates/{candidate.pk}/reviews/", {"decision": "discard"}, format="json"
            ),
        ),
    ]
    _api(bob).post(
        f"/api/candidates/{candidate.pk}/reviews/",
        {"decision": "revise", "revised_text": "What dish is this?"},
        format="json",
    )
    answers += [
        (
            "/api/candidates/{candidate_id}/",
            "get",
            _api(alice).get(f"/api/candidates/{candidate.pk}/"),
        ),
        ("/api/images/{source_id}/", "get", _api(alice).get("/api/images/img-1/")),
        ("/api/adjudication/claim/", "post", _api(carol).post("/api/adjudication/claim/")),
        (
            "/api/candidates/{candidate_id}/adjudication/",
            "post",
            _api(carol).post(
                f"/api/candidates/{candidate.pk}/adjudication/",
                {"decision": "revise", "revised_text": "What dish is this?"},
                format="json",
            ),
        ),
    ]
    for path, method, response in answers:
        assert response.status_code in (200, 201), (path, response.status_code)
        assert response_mismatches(schema, path, method, response) == [], path


def test_the_schema_describes_every_field_of_the_adjudication_claim(schema):
    claim = schema["paths"]["/api/adjudication/claim/"]["post"]["responses"]["200"]
    ref = claim["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = set(schema["components"]["schemas"][ref]["properties"])
    assert {"id", "text", "round", "image", "lease", "candidate", "reviews"} <= fields


def test_a_judging_run_launch_documents_its_job_and_estimate(schema):
    launched = schema["paths"]["/api/judging/runs/launch/"]["post"]["responses"]["201"]
    ref = launched["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][ref]["properties"]) == {"job", "estimate"}


def test_the_schema_is_generated_without_a_warning(tmp_path):
    """drf-spectacular warns of what makes a poor contract (an enum named by hash, a view it
    cannot read): none may be left."""
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "CandidateStatusEnum" in (tmp_path / "schema.yml").read_text()
