"""manage.py training (standings, reset, let through) and manage.py draw_audits."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import AuditEvent, QualityConfig, ReviewAudit, TrainingState
from annotation.review import services
from annotation.training import gold

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _training_set(root, make_image, n=2):
    for i in range(n):
        image, _ = make_image(f"gold-{i}", [])
        gold.gold_item_create(
            user=root,
            image_id=image.pk,
            text=f"Gold question {i}?",
            decision="accept",
            note="A fine question.",
            training=True,
        )


def test_training_lists_standings_and_answers_as_the_expert(root, alice, bob, make_image):
    _training_set(root, make_image)
    TrainingState.objects.create(user=bob, passed_at="2026-12-01T10:00Z")
    text = run("training")
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert "not started" in lines["alice"] and "passed" in lines["bob"]
    rows = {row["username"]: row for row in json.loads(run("training", "--json"))}
    assert rows["alice"]["standing"] == "not_started" and rows["bob"]["standing"] == "passed"
    assert rows["alice"]["attempt"] == 1 and rows["alice"]["share"] is None


def test_training_reset_and_pass_are_an_admins_and_recorded(root, alice, make_image):
    _training_set(root, make_image)
    assert "may start real work" in run("training", "pass", "alice", "--by", root.username)
    assert TrainingState.objects.get(user=alice).passed_at is not None
    assert AuditEvent.objects.filter(action="training.pass", actor=root).count() == 1
    # Let through twice: refused, exit 2, nothing recorded.
    with pytest.raises(CommandError, match="passed the training already") as refused:
        run("training", "pass", "alice", "--by", root.username)
    assert refused.value.returncode == 2
    assert AuditEvent.objects.filter(action="training.pass").count() == 1
    assert "attempt 2" in run("training", "reset", "alice", "--by", root.username)
    state = TrainingState.objects.get(user=alice)
    assert state.attempt == 2 and state.passed_at is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["reset", "alice"], "--by must name an admin"),
        (["reset", "alice", "--by", "alice"], "--by must name an admin"),
        (["reset", "--by", "root"], "name the annotator"),
        (["reset", "nobody", "--by", "root"], "There is no user 'nobody'"),
        (["pass", "root", "--by", "root"], "There is no annotator"),
    ],
)
def test_training_refuses_bad_arguments_with_exit_2(root, alice, args, message):
    with pytest.raises(CommandError, match=message) as refused:
        run("training", *args)
    assert refused.value.returncode == 2
    assert not TrainingState.objects.exists()


def test_draw_audits_draws_what_is_due_once(alice, bob, make_image):
    for i in range(4):
        _, (candidate,) = make_image(f"img-{i}", [f"Q {i}?"])
        services.review_submit(user=alice, candidate_id=candidate.pk, decision="accept")
        services.review_submit(user=bob, candidate_id=candidate.pk, decision="accept")
    config = QualityConfig.current()
    config.review_audit_rate = 0.5
    config.save()
    text = run("draw_audits")
    assert "Drew 4 review audit(s) and 0 round audit(s)" in text
    assert ReviewAudit.objects.filter(annotator=alice).count() == 2
    assert "Drew 0 review audit(s)" in run("draw_audits")
    assert "waiting for a verdict: 4 review audit(s)" in run("draw_audits")
