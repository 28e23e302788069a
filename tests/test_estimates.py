"""Every stage's estimate against the calls then made: the console's estimate of generation,
the guard, rubric construction and both refinement rounds, and the judging page's estimate of
collection and judging (a first run, then a rerun after a one-check human edit), each within
10% of the requests the fake server then receives (repairs aside: the fake answers every call
validly, so none is repaired).

The stages run in this process (the job console's services, chunks drained here) through the
real google-genai client against the pipeline fake of tests/test_pipeline_e2e.py."""

from __future__ import annotations

import json

import pytest
from django.core.files.base import ContentFile

from annotation.images.importing import images_import, manifest_parse
from annotation.models import Candidate, FinalQuestion
from annotation.review import services as review
from conftest import png_bytes
from judging.models import EvaluatedModel, Judge, Response
from judging.runs import llm_jobs as judging_jobs
from llm import launchers
from llm.models import LLMModel
from llm.tasks import run_job_chunk
from llm.tests.conftest import Harness
from rubrics import services as rubric_services
from rubrics.models import RubricVersion, Stage
from tests.test_pipeline_e2e import MODEL, fake  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

SOURCES = ["img-est-1", "img-est-2", "img-est-3"]
# Distinct entities (and photos): no two items send the same request, which the ledger's cache
# would answer once for both whenever one finishes before the other asks.
ENTITIES = ["Beef bourguignon", "Coq au vin", "Cassoulet"]


def within_ten_percent(estimated: int, observed: int) -> bool:
    return abs(estimated - observed) <= 0.1 * observed


@pytest.fixture
def world(fake, settings, tmp_path, monkeypatch, root):  # noqa: F811 (fixture)
    monkeypatch.setattr(run_job_chunk, "delay_on_commit", lambda job_id: None)
    monkeypatch.setattr(run_job_chunk, "apply_async", lambda args, countdown=None, **options: None)
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.LLM_MODEL_GENERATION = settings.LLM_MODEL_GUARD = MODEL
    settings.LLM_MODEL_RUBRICS = MODEL
    LLMModel.objects.create(
        name=MODEL, provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    folder = tmp_path / "upload"
    folder.mkdir()
    lines = []
    for n, (source, entity) in enumerate(zip(SOURCES, ENTITIES, strict=True)):
        (folder / f"{source}.png").write_bytes(png_bytes(color=(40 * n, 100, 200)))
        lines.append(
            json.dumps(
                {
                    "source_id": source,
                    "image": f"{source}.png",
                    "entity": entity,
                    "domain": "food",
                    "popularity": "head",
                }
            )
        )
    imported = images_import(
        manifest_parse(lines, folder), actor=root, source="upload", file_name="manifest.jsonl"
    )
    assert imported.imported == SOURCES
    return Harness(fake)


def console_stage(harness: Harness, key: str, root) -> tuple[int, int]:
    """(the console's estimate of calls, the calls then made) of one stage on all eligible."""
    launcher = launchers.get_launcher(key)
    assert launcher is not None
    estimate = launchers.estimate(launcher, launcher.eligible(None), launcher.model())
    harness.fake.requests.clear()
    harness.drain(launcher.launch(user=root))
    return estimate.calls_min, len(harness.fake.requests)


def test_the_entity_proposals_estimate_is_the_calls_made(
    fake,  # noqa: F811 (fixture)
    settings,
    tmp_path,
    monkeypatch,
    root,
):
    """CRAG-MM images without an entity: one call each, as the console says beforehand."""
    monkeypatch.setattr(run_job_chunk, "delay_on_commit", lambda job_id: None)
    from annotation.images.crag_mm import DATASET
    from annotation.models import Image, ImportBatch

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.LLM_MODEL_GENERATION = MODEL  # entity proposals use it when LLM_MODEL_ENTITIES is ""
    LLMModel.objects.create(
        name=MODEL, provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    batch = ImportBatch.objects.create(source="command", file_name="crag", dataset=DATASET)
    for n, source in enumerate(SOURCES):
        image = Image(
            source_id=source,
            domain="food",
            popularity="unknown",
            entity_confirmed=False,
            import_batch=batch,
            source_query=f"what dish is this? ({n})",  # distinct requests: no cache hit
            source_answer="A French stew.",
        )
        image.file.save(f"{source}.png", ContentFile(png_bytes(color=(40 * n, 100, 200))))
    harness = Harness(fake)
    estimated, observed = console_stage(harness, "propose_entities", root)
    print(f"\nentity proposals: estimate {estimated}, calls made {observed}")
    assert estimated == observed == len(SOURCES)
    assert Image.objects.entity_proposed().count() == len(SOURCES)


def test_every_stages_estimate_is_within_ten_percent_of_the_calls_made(
    world, root, alice, bob, dave
):
    harness = world
    figures: dict[str, tuple[int, int]] = {}

    figures["generate"] = console_stage(harness, "generate", root)
    for source in SOURCES:  # two annotators accept each image's first candidate
        chosen = Candidate.objects.filter(image__source_id=source).order_by("pk").first()
        for annotator in (alice, bob):
            review.review_submit(user=annotator, candidate_id=chosen.pk, decision="accept")
    figures["guard"] = console_stage(harness, "guard", root)
    assert FinalQuestion.objects.count() == len(SOURCES)
    figures["build"] = console_stage(harness, "build", root)
    figures["refine1"] = console_stage(harness, "refine1", root)
    assert RubricVersion.objects.filter(stage=Stage.LLM_REFINED_1).count() == len(SOURCES)

    llm = LLMModel.objects.get(name=MODEL)
    evaluated = EvaluatedModel.objects.create(name="model-est", llm_model=llm)
    judge = Judge.objects.create(name="judge-est", llm_model=llm)
    collect = len(judging_jobs.collect_items(evaluated=evaluated, setting="multimodal"))
    harness.fake.requests.clear()
    harness.drain(judging_jobs.collect_launch(user=root, evaluated=evaluated, setting="multimodal"))
    figures["collect"] = (collect, len(harness.fake.requests))
    # The fake gives every question the same answer; real answers differ, and a verdict's key
    # holds the response's text: without this, one response's verdicts would answer the
    # others' (copies), depending on which item ran first.
    for response in Response.objects.select_related("question__image"):
        response.text = f"{response.text} ({response.question.image.entity})"
        response.save(update_fields=["text"])

    def judge_stage() -> tuple[int, int]:
        scope = judging_jobs.judge_scope(judge=judge)
        harness.fake.requests.clear()
        harness.drain(judging_jobs.judge_launch(user=root, judge=judge))
        return scope.calls, len(harness.fake.requests)

    figures["judge"] = judge_stage()

    # A human round edits one check of one rubric; the rest of round 1 completes unchanged.
    for n in range(len(SOURCES)):
        version = rubric_services.revision_claim(user=dave)
        assert version is not None and version.stage == Stage.HUMAN_1
        if n == 0:
            row = version.checks.order_by("position").first()
            rubric_services.check_edit_text(
                user=dave,
                version_id=version.pk,
                check_pk=row.pk,
                text=row.text + " (edited)",
                revision=version.revision,
            )
            version.refresh_from_db()
        rubric_services.revision_complete(
            user=dave, version_id=version.pk, revision=version.revision
        )
    figures["judge after a one-check edit"] = judge_stage()
    figures["refine2"] = console_stage(harness, "refine2", root)

    print(
        "\nestimate against calls made, per stage: "
        + ", ".join(
            f"{stage} {estimated}/{observed}" for stage, (estimated, observed) in figures.items()
        )
    )
    assert figures["judge after a one-check edit"] == (1, 1)
    for stage, (estimated, observed) in figures.items():
        assert observed > 0, stage
        assert within_ten_percent(estimated, observed), (stage, estimated, observed)
