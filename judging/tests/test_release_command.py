"""manage.py release create|list|show|diff, and the demo's release (issue 25)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from judging.models import Release
from judging.tests.conftest import make_question
from judging.tests.test_releases import _human_round, _judge_all

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("release", *args, stdout=out)
    return out.getvalue()


def test_create_list_show_and_diff(judge, respond):
    q0 = make_question("q0", tiers=("answer_critical", "valuable"))
    q1 = make_question("q1", tiers=("answer_critical",))
    for question in (q0, q1):
        _judge_all(judge, respond(question, "model-a"))
    out = run("create", "v1.0", "--notes", "the first")
    release = Release.objects.get(name="v1.0")
    assert f"released v1.0: 2 question(s), content hash {release.content_hash}" in out
    assert release.notes == "the first" and release.created_by is None
    listed = run("list")
    assert listed.startswith("v1.0\t") and "2 questions" in listed

    shown = run("show", "v1.0")
    assert release.content_hash in shown
    assert "scoring: lambda 0.5, mu -2.0, tier weights 0.6 / 0.3 / 0.1" in shown
    assert "model-a\t100.0" in shown and "scored 2, pending 0" in shown
    as_json = json.loads(run("show", "v1.0", "--json"))
    assert as_json["boards"][0]["rows"][0]["gamut"] == 100.0
    _human_round(q0, retier={1: "context"}, add=[("valuable", "a new check")])
    diff = run("diff", "v1.0", "draft")
    assert "from v1.0 to working draft" in diff
    assert "checks: 1 added, 0 removed, 0 reworded, 1 re-tiered" in diff
    assert "H1 added: at valuable: a new check" in diff
    assert "C1 re-tiered: valuable -> context" in diff
    # q0 has no verdict on its new version yet: scored on the shared q1 only
    assert (
        "model-a: 100.0 -> 100.0, moved +0.0 (no interval: too few questions) on 1 question(s)"
        in diff
    )
    as_json = json.loads(run("diff", "v1.0", "draft", "--json", "--setting", "multimodal"))
    assert as_json["checks"]["re-tiered"] == 1 and len(as_json["models"]) == 1


def test_refusals_say_what_is_wrong():
    with pytest.raises(CommandError, match="no question to release") as refused:
        run("create", "v1")
    assert refused.value.returncode == 2
    make_question("q0")
    run("create", "v1")
    assert "\t1 question\t" in run("list")  # one question, not "1 questions"
    with pytest.raises(CommandError, match="A release named v1 exists already"):
        run("create", "v1")
    with pytest.raises(CommandError, match="letters, digits"):
        run("create", "v1/x")
    with pytest.raises(CommandError, match=r"No release named v2 \(releases: v1\)"):
        run("show", "v2")
    with pytest.raises(CommandError, match="No release named v2"):
        run("diff", "v1", "v2")
    with pytest.raises(CommandError, match="No judge named nobody"):
        run("diff", "v1", "draft", "--judge", "nobody")
    assert run("list").count("\n") == 1


def test_the_demo_cuts_a_demo_release_once(capsys):
    call_command("load_demo")
    assert "demo release v1.0 (demo) cut" in capsys.readouterr().out
    release = Release.objects.get()
    assert release.name == "v1.0 (demo)" and "Demo" in release.notes
    assert release.created_by.username == "admin"
    assert release.questions.count() == 1
    call_command("load_demo")
    assert "demo release" not in capsys.readouterr().out
    assert Release.objects.count() == 1
    assert "v1.0 (demo)" in run("show", "v1.0 (demo)")
