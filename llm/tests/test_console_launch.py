"""Launching from the job console: who may ask for an estimate or launch, the estimate's figures
for a known model price, the launch going through the app's helper, the scope by source ids
(unknown ids refused by name), and errors shown as messages. Jobs are created, never run."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.questions.llm_jobs import GENERATE
from llm import launchers
from llm.models import Job, LLMModel

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sent")]


def post(
    client, name: str, launcher: str = "generate", scope: str = "all", ids: str = "", **headers
):
    return client.post(reverse(name), {"launcher": launcher, "scope": scope, "ids": ids}, **headers)


def test_every_stage_is_registered():
    keys = [launcher.key for launcher in launchers.all_launchers()]
    assert keys[:6] == ["propose_entities", "generate", "guard", "build", "refine1", "refine2"]
    calls = {launcher.key: launcher.calls_per_item for launcher in launchers.all_launchers()}
    assert calls == {
        "propose_entities": 1,
        "generate": 1,
        "guard": 1,
        "build": 2,
        "refine1": 4,
        "refine2": 4,
    }


@pytest.mark.parametrize("name", ["job_estimate", "job_launch"])
def test_anonymous_and_annotators_are_refused(client, alice, make_image, model, name):
    make_image("img-1", [])
    response = post(client, name)
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(alice)
    assert post(client, name).status_code == 403
    assert not Job.objects.exists()


def test_get_is_refused(client, root):
    client.force_login(root)
    assert client.get(reverse("job_estimate")).status_code == 405
    assert client.get(reverse("job_launch")).status_code == 405


def test_csrf_is_enforced(root, make_image, model):
    from django.test import Client

    make_image("img-1", [])
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    assert post(client, "job_estimate").status_code == 403
    assert post(client, "job_launch").status_code == 403
    assert not Job.objects.exists()


def test_estimate_figures_for_a_known_price(client, root, make_image, model):
    for n in range(3):
        make_image(f"img-{n}", [])  # no candidates: all three need generation
    client.force_login(root)
    response = post(client, "job_estimate", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html  # the partial only
    per_in, per_out = launchers.TYPICAL_TOKENS[GENERATE]
    calls_min, calls_max = 3, 9  # 1 call per image, plus up to LLM_MAX_REPAIRS (2) repairs
    assert 'data-field="items">3<' in html
    assert f'data-field="calls">{calls_min}–{calls_max}<' in html
    assert f'data-field="tokens_in">{calls_min * per_in}–{calls_max * per_in}<' in html
    cost_min = (
        Decimal(calls_min * per_in) * Decimal("1.25") + Decimal(calls_min * per_out) * 10
    ) / 1_000_000
    est = launchers.estimate(launchers.get_launcher("generate"), 3, model)
    assert est.cost_min == cost_min and est.cost_max == 3 * cost_min
    assert f"{cost_min:.4f}–{3 * cost_min:.4f}" in html
    assert reverse("job_launch") in html and "csrfmiddlewaretoken" in html
    assert not Job.objects.exists()  # an estimate launches nothing


def test_estimate_of_refine_counts_four_calls():
    # The audit, its structured verdicts, the research and the rebuild.
    model = LLMModel(
        name="m", price_input_per_million=Decimal("2"), price_output_per_million=Decimal("4")
    )
    est = launchers.estimate(launchers.get_launcher("refine1"), 2, model)
    per_in, per_out = launchers.TYPICAL_TOKENS["rubrics.refine"]
    assert (est.calls_min, est.calls_max) == (8, 12)  # up to 2 repairs an item
    assert est.tokens_out_max == 12 * per_out
    assert est.cost_min == (Decimal(8 * per_in) * 2 + Decimal(8 * per_out) * 4) / 1_000_000


def test_estimate_without_htmx_renders_the_page(client, root, make_image, model):
    make_image("img-1", [])
    client.force_login(root)
    html = post(client, "job_estimate").content.decode()
    assert "<html" in html and 'data-field="items">1<' in html


def test_estimate_errors_are_messages_not_error_pages(client, root, make_image, settings):
    settings.LLM_MODEL_GENERATION = ""
    make_image("img-1", [])
    client.force_login(root)
    response = post(client, "job_estimate", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "No model is configured" in response.content.decode()


def test_estimate_with_nothing_eligible(client, root, make_image, model):
    make_image("img-1")  # an open candidate: in review, not needing candidates
    client.force_login(root)
    html = post(client, "job_estimate", HTTP_HX_REQUEST="true").content.decode()
    assert "Nothing in this scope is eligible" in html
    assert reverse("job_launch") not in html


def test_unknown_ids_are_refused_by_name(client, root, make_image, model):
    make_image("img-1", [])
    client.force_login(root)
    ids = "img-1\nnope-1\n\nnope-2\n"
    html = post(
        client, "job_estimate", scope="chosen", ids=ids, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "nope-1" in html and "nope-2" in html and reverse("job_launch") not in html
    response = post(client, "job_launch", scope="chosen", ids=ids, follow=True)
    assert "nope-1, nope-2" in response.content.decode()
    assert not Job.objects.exists()


def test_chosen_scope_with_no_ids_is_refused(client, root, model):
    client.force_login(root)
    html = post(client, "job_estimate", scope="chosen", HTTP_HX_REQUEST="true").content.decode()
    assert "one per line" in html


def test_unknown_launcher_is_404(client, root):
    client.force_login(root)
    assert post(client, "job_estimate", launcher="nope").status_code == 404


def test_launch_all_eligible_creates_the_job_through_the_helper(
    client, root, make_image, model, sent, django_capture_on_commit_callbacks
):
    make_image("img-1", [])
    make_image("img-2", [])
    make_image("img-3")  # in review: not eligible
    client.force_login(root)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "job_launch")
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("job", args=[job.pk])
    assert job.kind == GENERATE and job.launched_by == root
    assert job.params["model"] == "gemini-test"
    assert sorted(job.items.values_list("key", flat=True)) == ["img-1", "img-2"]
    assert sent == [job.pk]


def test_launch_chosen_items(client, root, make_image, model):
    make_image("img-1", [])
    make_image("img-2", [])
    client.force_login(root)
    post(client, "job_launch", scope="chosen", ids="img-2\n")
    assert list(Job.objects.get().items.values_list("key", flat=True)) == ["img-2"]


def test_estimate_notes_chosen_items_left_out(client, root, make_image, model):
    make_image("img-1", [])
    make_image("img-2")  # in review, yet chosen: generation takes any image without question
    image, [candidate] = make_image("img-3")
    candidate.status = "accepted"
    candidate.save()
    client.force_login(root)
    html = post(
        client,
        "job_estimate",
        launcher="guard",
        scope="chosen",
        ids="img-1\nimg-3",
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'data-field="items">1<' in html and "1 of the chosen are not eligible" in html


def test_launch_error_is_a_message(client, root, make_image, settings):
    settings.LLM_MODEL_GUARD = ""
    make_image("img-1")
    client.force_login(root)
    response = post(client, "job_launch", launcher="guard", follow=True)
    assert response.status_code == 200
    assert "No model is configured" in response.content.decode()
    assert not Job.objects.exists()


def test_rubric_stage_refuses_unknown_questions(client, root, make_image, model):
    make_image("img-1", [])  # an image without a final question is unknown to rubric stages
    client.force_login(root)
    html = post(
        client,
        "job_estimate",
        launcher="build",
        scope="chosen",
        ids="img-1",
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "img-1" in html and "Unknown" in html


def test_console_shows_a_form_per_stage(client, root):
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    for key in ["generate", "guard", "build", "refine1", "refine2"]:
        assert f'id="estimate-{key}"' in html
    assert "<script>" not in html and "style=" not in html


def test_a_stage_without_a_model_says_so_and_what_to_set_before_its_form(client, root, settings):
    """As in the demo, which configures no model: each stage's card says it before the form."""
    settings.LLM_MODEL_GENERATION = settings.LLM_MODEL_GUARD = settings.LLM_MODEL_RUBRICS = ""
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    for key, setting in [
        ("generate", "LLM_MODEL_GENERATION"),
        ("guard", "LLM_MODEL_GUARD"),
        ("build", "LLM_MODEL_RUBRICS"),
        ("refine1", "LLM_MODEL_RUBRICS"),
    ]:
        card = html[html.index(f'id="launch-{key}"') : html.index(f'id="estimate-{key}"')]
        note = card[card.index(f'data-testid="no-model-{key}"') :]
        assert setting in note and note.index(setting) < card.index("<form") - card.index(
            f'data-testid="no-model-{key}"'
        )


def test_a_stage_with_its_model_shows_no_such_note(client, root, model):
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    assert 'data-testid="no-model-' not in html


@pytest.mark.parametrize("launcher", ["generate", "guard", "build", "refine1", "refine2"])
def test_every_stage_can_be_launched_with_fresh_calls(launcher):
    import inspect

    assert "fresh" in inspect.signature(launchers.get_launcher(launcher).launch).parameters


def test_the_fresh_checkbox_reaches_the_job(client, root, make_image, model):
    make_image("img-1", [])
    client.force_login(root)
    html = post(client, "job_estimate", HTTP_HX_REQUEST="true").content.decode()
    assert 'name="fresh"' in html
    client.post(reverse("job_launch"), {"launcher": "generate", "scope": "all", "fresh": "1"})
    assert Job.objects.get().params["fresh"] is True
    Job.objects.all().delete()
    post(client, "job_launch")
    assert Job.objects.get().params["fresh"] is False


def test_a_hostile_fresh_value_is_refused_by_name(client, root, make_image, model):
    make_image("img-1", [])
    client.force_login(root)
    response = client.post(
        reverse("job_launch"),
        {"launcher": "generate", "scope": "all", "fresh": "<script>"},
        follow=True,
    )
    assert response.status_code == 200
    assert "fresh: expected a checkbox" in response.content.decode()
    assert not Job.objects.exists()


def test_the_ids_box_shows_its_limit_and_a_longer_list_is_refused_in_words(
    client, root, make_image, model
):
    """The box of source ids has a limit (core.text), shown and counted under it and held by
    maxlength; a longer list (a browser that ignores maxlength) is refused in the page's words,
    the list kept in the box, and nothing is launched."""
    from core.text import MAX_SOURCE_IDS

    make_image("img-1", [])
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    boxes = re.findall(r'(<textarea name="ids" rows="3"[^>]*>)</textarea>(<small[^>]*>)', html)
    assert len(boxes) == len(launchers.all_launchers())
    for box, note in boxes:
        assert f'maxlength="{MAX_SOURCE_IDS}"' in box
        assert f'class="limit" data-limit="{MAX_SOURCE_IDS}"' in note
    ids = "img-1\n" * (MAX_SOURCE_IDS // 6 + 1)
    said = (
        f"The source ids are longer than {MAX_SOURCE_IDS:,} characters ({len(ids):,} sent): "
        "shorten them."
    )
    partial = post(client, "job_estimate", scope="chosen", ids=ids, HTTP_HX_REQUEST="true")
    assert said in partial.content.decode()
    assert reverse("job_launch") not in partial.content.decode()
    page = post(client, "job_estimate", scope="chosen", ids=ids).content.decode()
    assert said in page
    assert f'<textarea name="ids" rows="3" maxlength="{MAX_SOURCE_IDS}">{ids}</textarea>' in page
    launched = post(client, "job_launch", scope="chosen", ids=ids, follow=True)
    assert said in launched.content.decode()
    assert not Job.objects.exists()
    # The box is read only for chosen items: all eligible is not refused for what it holds.
    partial = post(client, "job_estimate", scope="all", ids=ids, HTTP_HX_REQUEST="true")
    assert reverse("job_launch") in partial.content.decode()
