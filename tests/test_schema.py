"""The OpenAPI schema is the contract: every operation documents the statuses that the layers
around every view can answer, with the one Error body, and those answers are JSON."""

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

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
