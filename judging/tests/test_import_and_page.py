"""import_responses, and the leaderboard page: access, exports, pinned query count."""

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from judging.models import Response
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

pytestmark = pytest.mark.django_db


def _write(tmp_path, lines):
    path = tmp_path / "responses.jsonl"
    path.write_text("\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines))
    return path


def _line(source_id="q1", model="model-a", setting="multimodal", response="An answer."):
    return {"source_id": source_id, "model": model, "setting": setting, "response": response}


def test_import_responses_writes_and_skips_existing(tmp_path, capsys):
    make_question("q1")
    make_question("q2")
    path = _write(tmp_path, [_line(), _line("q2"), _line(setting="text_only")])
    call_command("import_responses", str(path))
    assert Response.objects.count() == 3
    assert "new model model-a" in capsys.readouterr().out
    path = _write(tmp_path, [_line(), _line(model="model-b")])
    call_command("import_responses", str(path))
    out = capsys.readouterr().out
    assert "skipped q1 model-a multimodal: already imported" in out
    assert "imported 1 response(s), skipped 1" in out
    assert Response.objects.count() == 4


def test_import_responses_validates_everything_first(tmp_path, capsys):
    make_question("q1")
    dropped = make_question("q2")
    dropped.dropped_at = timezone.now()
    dropped.save()
    path = _write(
        tmp_path,
        [
            _line(),  # 1 fine
            "{not json",  # 2
            _line("nope"),  # 3 unknown source id
            _line("q2"),  # 4 dropped
            _line(setting="audio"),  # 5 bad setting
            _line(),  # 6 repeats line 1
            {"source_id": "q1", "model": "m", "setting": "multimodal"},  # 7 missing response
        ],
    )
    with pytest.raises(SystemExit) as exc:
        call_command("import_responses", str(path))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for fragment in (
        "line 2: not valid JSON",
        "line 3: source_id 'nope' has no final question",
        "line 4: the question of 'q2' was dropped",
        "line 5: setting must be multimodal or text_only",
        "line 6: ('q1', 'model-a', 'multimodal') repeats line 1",
        "line 7: missing field 'response'",
        "6 bad line(s); nothing was imported",
    ):
        assert fragment in err
    assert not Response.objects.exists()


def _populate(n_models, respond, judge):
    for i in range(4):
        q = make_question(f"q{i}", domain=["food", "art"][i % 2])
        for m in range(n_models):
            response = respond(q, model=f"model-{m}")
            for check in final_checks(q):
                verdict_record(
                    judge=judge,
                    response=response,
                    check=check,
                    verdict=["meets", "missing", "contradicts"][(i + m) % 3],
                )


def test_leaderboard_is_for_admins_only(client, mallory, alice, judge):
    url = reverse("leaderboard")
    assert client.get(url).status_code == 302  # to the login page
    for person in (mallory, alice):
        client.force_login(person)
        assert client.get(url).status_code == 403


@pytest.mark.parametrize("n_models", [2, 6])
def test_leaderboard_page_query_count(
    client, root, judge, respond, n_models, django_assert_num_queries
):
    _populate(n_models, respond, judge)
    client.force_login(root)
    # 9, the releases (for the selector; none here), the scoring settings, and the random
    # audit's pairs (none here): whatever the models
    with django_assert_num_queries(11):
        response = client.get(reverse("leaderboard"), {"judge": judge.name})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.count('aria-label="Gamut') == n_models
    assert 'data-testid="by-domain"' in body and 'data-testid="by-popularity"' in body


def test_exports(client, root, judge, respond):
    _populate(2, respond, judge)
    client.force_login(root)
    url = reverse("leaderboard")
    data = client.get(url, {"judge": judge.name, "setting": "multimodal", "format": "json"}).json()
    assert data["judge"] == judge.name and data["questions"] == 4
    assert [r["model"] for r in data["rows"]] and {
        "gamut",
        "ci_low",
        "ci_high",
        "answer_critical",
        "missing",
        "failed",
    } <= set(data["rows"][0])
    response = client.get(url, {"judge": judge.name, "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["model"] for r in rows] == [r["model"] for r in data["rows"]]
    assert float(rows[0]["gamut"]) == pytest.approx(data["rows"][0]["gamut"])


def test_leaderboard_without_judges(client, root):
    client.force_login(root)
    assert "No judge has been set up yet" in client.get(reverse("leaderboard")).content.decode()


@pytest.mark.parametrize("depth", [100, 5000])
def test_import_responses_refuses_deep_json_with_its_line(tmp_path, capsys, depth):
    make_question("q1")
    deep = '{"source_id": "q1", "response": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(SystemExit) as exc:
        call_command("import_responses", str(_write(tmp_path, [_line(), deep])))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    (reported,) = [m for m in err.splitlines() if ": line 2: " in m]
    assert reported.endswith("nested deeper than the limit of 32 levels")
    assert not Response.objects.exists()


def test_import_responses_lists_100_problems_and_counts_the_rest(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        call_command("import_responses", str(_write(tmp_path, ["[1]"] * 250)))
    assert exc.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 102
    assert lines[99].endswith("line 100: not a JSON object")
    assert lines[100].endswith(": … and 150 more problems")
    assert lines[101] == "250 bad line(s); nothing was imported."


def test_import_responses_refuses_hostile_texts_with_their_line(tmp_path, capsys):
    make_question("q1")
    path = _write(
        tmp_path,
        [
            _line(),  # 1 fine
            _line("q/1"),  # 2 unsafe source id
            _line(model="model\x00a"),  # 3 NUL in the name
            _line(model="gpt-\u202e5"),  # 4 a bidirectional override in the name
            _line(model="m" * 101),  # 5 longer than the column
            _line(response="An \x1b[31manswer"),  # 6 a control character in the answer
            _line(response="x" * 200_001),  # 7 an answer too long
            _line(model="model-b", response="\u05e9\u05dc\u05d5\u05dd\n\u200fline two"),  # 8 fine
        ],
    )
    with pytest.raises(SystemExit) as exc:
        call_command("import_responses", str(path))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for fragment in (
        "line 2: source_id may hold only letters, digits and - _ . : (not 'q/1').",
        "line 3: model may not contain U+0000",
        "line 4: model may not contain U+202E (right-to-left override)",
        "line 5: model is longer than 100 characters.",
        "line 6: response may not contain U+001B",
        "line 7: response is longer than 200000 characters.",
        "6 bad line(s); nothing was imported",
    ):
        assert fragment in err
    assert "line 1:" not in err and "line 8:" not in err
    assert not Response.objects.exists()
