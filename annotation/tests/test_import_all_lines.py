"""A JSON syntax error on one manifest line hides nothing of the other lines' problems (issue 24,
section 4): the browser's and the API's import report all of them, each with its line number."""

import re

import pytest
from rest_framework.test import APIClient

from annotation.models import Image
from annotation.tests.test_import import line, manifest_file, zip_of
from conftest import png_bytes

pytestmark = pytest.mark.django_db

BAD = (
    line("s1", "s1.png"),
    '{"source_id": "s2", "image": "s2.png",',  # a JSON syntax error
    line("s3", "s3.png", popularity="viral"),
    line("s1", "s1.png"),  # repeats line 1
    '{"source_id": "s5", "image": "s5.png"}',  # no entity, no domain
)


def _numbers(messages: list[str]) -> list[int]:
    return [int(re.match(r"line (\d+):", m).group(1)) for m in messages]


def test_the_browser_import_reports_every_bad_line(client, root):
    client.force_login(root)
    response = client.post(
        "/import/",
        {"manifest": manifest_file(*BAD), "images": zip_of({"s1.png": png_bytes()})},
    )
    assert response.status_code == 400
    body = response.content.decode()
    listed = re.findall(r"<li>(line \d+: [^<]*)</li>", body)
    assert _numbers(listed) == [2, 3, 4, 5]
    assert "not valid JSON" in listed[0]
    assert "popularity must be head, torso, tail or unknown" in listed[1]
    assert "repeats line 1" in listed[2]
    assert "missing field &#x27;entity&#x27;" in listed[3]
    assert not Image.objects.exists()


def test_the_api_import_reports_every_bad_line(root):
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(
        "/api/images/import/",
        {"manifest": manifest_file(*BAD), "images": zip_of({"s1.png": png_bytes()})},
        format="multipart",
    )
    assert response.status_code == 400
    assert _numbers(response.json()["errors"]) == [2, 3, 4, 5], response.json()
    assert response.json()["detail"] == "4 problem(s); nothing was imported."
