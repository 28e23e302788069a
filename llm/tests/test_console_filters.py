"""The console's third scope: a filter by domain and, where the stage has them, by state. The
filtered items go through the stage's own eligibility, as chosen ones do; a launcher registered
without a filter (the signature every app used before) keeps working without one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from annotation.models import CandidateStatus, FinalQuestion
from annotation.questions.llm_jobs import GENERATE, select_images
from llm import jobs, launchers
from llm.models import Job, LLMModel
from rubrics.llm_jobs import select_questions
from rubrics.models import Rubric, RubricVersion, Stage

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sent")]


@pytest.fixture
def images(make_image) -> dict[str, Any]:
    """food-1: no candidate; food-2: its one candidate discarded; food-3: one in review;
    art-1: no candidate; art-2: an accepted candidate (the guard's)."""
    made = {
        "food-1": make_image("food-1", []),
        "food-2": make_image("food-2"),
        "food-3": make_image("food-3"),
        "art-1": make_image("art-1", [], domain="art"),
        "art-2": make_image("art-2", domain="art"),
    }
    made["food-2"][1][0].status = CandidateStatus.DISCARDED
    made["food-2"][1][0].save()
    made["art-2"][1][0].status = CandidateStatus.ACCEPTED
    made["art-2"][1][0].save()
    return {key: image for key, (image, _) in made.items()}


def post(client, name: str, launcher: str = "generate", **fields: str):
    data = {"launcher": launcher, "scope": "filter", "ids": "", **fields}
    return client.post(reverse(name), data, HTTP_HX_REQUEST="true")


def keys(job: Job) -> list[str]:
    return sorted(job.items.values_list("key", flat=True))


# --- the select functions ---------------------------------------------------------------------


def test_images_by_domain_and_generation_state(images):
    def chosen(**filters: str) -> list[str]:
        return sorted(images_by_pk[pk] for pk in select_images(**filters))

    images_by_pk = {image.pk: key for key, image in images.items()}
    assert chosen(domain="art") == ["art-1", "art-2"]
    assert chosen(state="no_candidates") == ["art-1", "food-1"]
    assert chosen(state="all_discarded") == ["food-2"]
    assert chosen(state="in_review") == ["food-3"]
    assert chosen(domain="food", state="no_candidates") == ["food-1"]
    assert chosen(domain="sport") == []


def test_questions_by_domain_and_rubric_stage(images):
    art2 = images["art-2"]
    candidate = art2.candidates.get()
    question = FinalQuestion.objects.create(
        image=art2, candidate=candidate, text=candidate.text, method=FinalQuestion.Method.MANUAL
    )
    assert select_questions(state="none") == [question.pk]
    rubric = Rubric.objects.create(question=question)
    RubricVersion.objects.create(rubric=rubric, stage=Stage.LLM_DRAFT, meta_rubric={})
    assert select_questions(state="none") == []
    assert select_questions(state=Stage.LLM_DRAFT) == [question.pk]
    RubricVersion.objects.create(rubric=rubric, stage=Stage.LLM_REFINED_1, meta_rubric={})
    assert select_questions(state=Stage.LLM_DRAFT) == []  # the latest version counts
    assert select_questions(domain="art", state=Stage.LLM_REFINED_1) == [question.pk]
    assert select_questions(domain="food") == []


# --- estimate and launch through the console ----------------------------------------------------


def test_console_offers_domains_and_states_where_a_stage_has_them(client, root, images):
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    generate = html[html.index('data-launcher="generate"') : html.index('data-launcher="guard"')]
    assert 'value="filter"' in generate
    assert '<option value="art"' in generate and '<option value="food"' in generate
    assert '<option value="all_discarded"' in generate
    guard = html[html.index('data-launcher="guard"') : html.index('data-launcher="build"')]
    assert '<option value="art"' in guard and 'name="state"' not in guard  # no states
    refine = html[html.index('data-launcher="refine1"') :]
    assert f'<option value="{Stage.LLM_DRAFT}"' in refine


def test_estimate_and_launch_by_domain(
    client, root, images, model, sent, django_capture_on_commit_callbacks
):
    client.force_login(root)
    html = post(client, "job_estimate", domain="food").content.decode()
    # food-1 and food-2 need candidates; food-3 is in review, which generation also takes.
    assert 'data-field="items">3<' in html
    assert 'name="domain" value="food"' in html  # carried to the launch form
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("job_launch"),
            {"launcher": "generate", "scope": "filter", "domain": "food", "state": ""},
        )
    job = Job.objects.get()
    assert response["Location"] == reverse("job", args=[job.pk])
    assert job.kind == GENERATE and keys(job) == ["food-1", "food-2", "food-3"]
    assert sent == [job.pk]


def test_launch_by_state_and_domain(client, root, images, model):
    client.force_login(root)
    client.post(
        reverse("job_launch"),
        {"launcher": "generate", "scope": "filter", "domain": "food", "state": "no_candidates"},
    )
    assert keys(Job.objects.get()) == ["food-1"]


def test_the_estimate_counts_matching_items_the_stage_cannot_take(client, root, images, model):
    client.force_login(root)
    html = post(client, "job_estimate", launcher="guard", domain="art").content.decode()
    assert 'data-field="items">1<' in html  # only art-2 has an accepted candidate
    assert "1 of the 2 matching the filter are not eligible" in html


def test_filters_are_checked(client, root, images, model):
    client.force_login(root)
    for fields, error in [
        ({}, "Choose a domain, a state, or both"),
        ({"state": "bogus"}, "Unknown state"),
        ({"domain": "sport"}, "Unknown domain"),
        ({"launcher": "guard", "state": "no_candidates"}, "Unknown state"),
    ]:
        html = post(client, "job_estimate", **fields).content.decode()
        assert error in html and reverse("job_launch") not in html, fields
    html = post(client, "job_estimate", launcher="build", domain="art").content.decode()
    assert "Nothing in this scope is eligible" in html
    response = client.post(
        reverse("job_launch"),
        {"launcher": "generate", "scope": "filter", "state": "bogus"},
        follow=True,
    )
    assert "Unknown state" in response.content.decode() and not Job.objects.exists()


# --- a launcher registered the way it was before filters --------------------------------------


@pytest.fixture
def plain_launcher() -> Iterator[launchers.Launcher]:
    async def handler(gateway: Any, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    jobs.register_kind("test.plain", handler, chunk_size=5, concurrency=1)
    launched: list[list[int] | None] = []

    def launch(*, user: Any, ids: list[int] | None = None, fresh: bool = False) -> Job:
        launched.append(ids)
        chosen = ids if ids is not None else [1, 2, 3]
        return jobs.job_launch(kind="test.plain", items=[(f"p{i}", {}) for i in chosen], user=user)

    launcher = launchers.register_launcher(
        "plain",
        label="Plain stage",
        kind="test.plain",
        order=99,
        launch=launch,
        eligible=lambda ids=None: 3 if ids is None else len(ids),
        resolve=lambda source_ids: (
            {s: int(s) for s in source_ids if s.isdigit()},
            [s for s in source_ids if not s.isdigit()],
        ),
        model=lambda: LLMModel.objects.get(name="gemini-test"),
        calls_per_item=1,
    )
    yield launcher
    launchers._launchers.pop("plain", None)
    jobs._registry.pop("test.plain", None)


def test_a_launcher_without_filters_keeps_working(client, root, model, plain_launcher):
    assert not plain_launcher.filterable and plain_launcher.states == ()
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    plain = html[html.index('data-launcher="plain"') :]
    assert 'value="all"' in plain and 'value="chosen"' in plain
    assert 'value="filter"' not in plain and 'name="domain"' not in plain
    assert (
        'data-field="items">3<'
        in post(client, "job_estimate", launcher="plain", scope="all").content.decode()
    )
    client.post(reverse("job_launch"), {"launcher": "plain", "scope": "chosen", "ids": "7\n8"})
    assert keys(Job.objects.get()) == ["p7", "p8"]
    html = post(client, "job_estimate", launcher="plain", domain="food").content.decode()
    assert "Plain stage has no filter" in html


def test_register_refuses_domains_or_states_without_select(model):
    with pytest.raises(ValueError, match="give select too"):
        launchers.register_launcher(
            "broken",
            label="Broken",
            kind="x",
            launch=lambda **_: None,  # type: ignore[arg-type]
            eligible=lambda ids=None: 0,
            resolve=lambda ids: ({}, []),
            model=lambda: model,
            calls_per_item=1,
            states=[("a", "A")],
        )
    assert launchers.get_launcher("broken") is None
