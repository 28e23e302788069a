"""Issue 21, item 2: a model that answers from the response schema alone, never reading an id
out of the prompt (tests/fake_llm.py, schema_only_reply), passes every stage end to end through
the job system: generation, the guard, rubric construction, refinement round 1, refinement
round 2 after a human round that changed checks, answer collection and judging. It can,
because each call's response schema lists the ids its reply may name (llm/schemas.py): the
guard's candidate ids, the audit's snippet ids, the human changes' ids, each list of one per id
at its exact length. Before, 0 of 6 rubrics got past the draft (every guard item and every
audit failed after both repair turns).

The chunks run in this process (the real chunk runner, gateway and google-genai client,
talking to the fake over loopback); run with `-s` to see the figures per stage."""

from __future__ import annotations

import json

import pytest
from django.db.models import Count, Q

from annotation.images.importing import images_import, manifest_parse
from annotation.models import Candidate, FinalQuestion
from annotation.questions import llm_jobs as annotation_jobs
from annotation.questions.llm_jobs import GuardOutput, guard_problems
from annotation.review import services as review
from conftest import png_bytes
from judging.models import EvaluatedModel, Judge, Response, Verdict
from judging.runs import llm_jobs as judging_jobs
from llm import schemas
from llm.models import Job, JobStatus, LedgerEntry, LLMModel
from llm.tests.conftest import Harness, sent  # noqa: F401 (fixture)
from rubrics import llm_jobs as rubric_jobs
from rubrics import services as rubrics
from rubrics.llm_jobs import AuditReply, audit_problems
from rubrics.models import RubricVersion, Stage
from tests.fake_llm import (  # noqa: F401 (fixture)
    FakeLLM,
    fake_llm,
    schema_answer,
    schema_only_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gemini-schema-only"
IMAGES = 3
# What a model decides on content, which no schema can say (never an id): the guard's
# candidates are specific, and a human change it did not read is dropped, with a reason.
CONTENT = {"boilerplate": False, "outcome": "dropped"}


@pytest.fixture
def harness(fake_llm: FakeLLM, settings, sent) -> Harness:  # noqa: F811 (the imported fixture)
    fake_llm.responder = schema_only_reply(CONTENT)
    for setting in ("LLM_MODEL_GENERATION", "LLM_MODEL_GUARD", "LLM_MODEL_RUBRICS"):
        setattr(settings, setting, MODEL)
    LLMModel.objects.create(
        name=MODEL, provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    return Harness(fake_llm)


def stage(harness: Harness, name: str, job: Job, figures: list[str]) -> Job:
    """Run the job's chunks to the end; every item done, none failed."""
    harness.drain(job)
    rows = LedgerEntry.objects.filter(job_id=job.pk)
    failures = list(job.items.filter(status="failed").values_list("key", "last_error"))
    figures.append(
        f"{name:<14} items {job.items_total:>2}  done {job.items_done:>2}  "
        f"failed {job.items_failed}  calls {rows.count():>3}  "
        f"repairs {rows.filter(is_repair=True).count()}"
    )
    assert (job.status, job.items_failed, failures) == (JobStatus.DONE, 0, [])
    assert job.items_done == job.items_total > 0
    return job


def test_a_model_answering_from_the_schema_alone_passes_every_stage(
    harness, tmp_path, root, alice, bob, dave
):
    folder = tmp_path / "upload"
    folder.mkdir()
    lines = []
    for n in range(IMAGES):
        (folder / f"photo-{n}.png").write_bytes(png_bytes((40 * n, 90, 160)))
        lines.append(
            json.dumps(
                {
                    "source_id": f"img-{n}",
                    "image": f"photo-{n}.png",
                    "entity": f"Entity {n}",
                    "domain": "food",
                    "popularity": "head",
                }
            )
        )
    images_import(manifest_parse(lines, folder), actor=root, source="upload", file_name="m.jsonl")
    figures: list[str] = []

    stage(harness, "generation", annotation_jobs.generation_launch(user=root), figures)
    for image in range(IMAGES):  # two annotators accept each image's second candidate
        chosen = Candidate.objects.filter(image__source_id=f"img-{image}").order_by("pk")[1]
        for annotator in (alice, bob):
            review.review_submit(user=annotator, candidate_id=chosen.pk, decision="accept")
    stage(harness, "guard", annotation_jobs.guard_launch(user=root), figures)
    assert FinalQuestion.objects.count() == IMAGES
    stage(harness, "build", rubric_jobs.rubric_build_launch(user=root), figures)
    stage(harness, "refine 1", rubric_jobs.rubric_refine_launch(user=root, round=1), figures)

    # Human round 1 on every rubric: its one compiled check edited and re-tiered, and two
    # checks added (one in Arabic and Chinese).
    for _ in range(IMAGES):
        version = rubrics.revision_claim(user=dave)
        assert version is not None and version.stage == Stage.HUMAN_1
        (check,) = version.checks.all()
        for service, fields in (
            (rubrics.check_edit_text, {"check_pk": check.pk, "text": "It is edited by hand."}),
            (rubrics.check_retier, {"check_pk": check.pk, "tier": "valuable"}),
            (rubrics.check_add, {"text": "يُقدَّم ساخنًا 趁热吃", "tier": "context"}),
            (rubrics.check_add, {"text": "It is added by hand.", "tier": "valuable"}),
            (rubrics.revision_complete, {}),
        ):
            version.refresh_from_db()
            service(user=dave, version_id=version.pk, revision=version.revision, **fields)

    stage(harness, "refine 2", rubric_jobs.rubric_refine_launch(user=root, round=2), figures)
    # A model that did not read the changes cannot carry them: each is dropped with a reason,
    # recorded on the version and in the item's result, never lost silently.
    for second in RubricVersion.objects.filter(stage=Stage.LLM_REFINED_2):
        assert [(h["op"], h["outcome"], bool(h["why"])) for h in second.human_changes] == [
            ("edit", "dropped", True),
            ("retier", "dropped", True),
            ("add", "dropped", True),
            ("add", "dropped", True),
        ]

    llm = LLMModel.objects.get(name=MODEL)
    evaluated = EvaluatedModel.objects.create(name="model-schema-only", llm_model=llm)
    judge = Judge.objects.create(name="judge-schema-only", llm_model=llm)
    collect = judging_jobs.collect_launch(user=root, evaluated=evaluated, setting="multimodal")
    stage(harness, "collection", collect, figures)
    assert Response.objects.filter(model=evaluated).count() == IMAGES
    stage(harness, "judging", judging_jobs.judge_launch(user=root, judge=judge), figures)
    assert Verdict.objects.filter(judge=judge).aggregate(
        n=Count("pk"), failed=Count("pk", filter=Q(verdict="failed"))
    ) == {"n": IMAGES * 1, "failed": 0}
    print("\nThe schema-only model through every stage:\n" + "\n".join(figures))

    # It needed no repair turn: what it could not know was in the schema.
    assert not LedgerEntry.objects.filter(is_repair=True).exists()
    # The ids it answered with came from the schemas sent: the guard's candidate ids, the
    # audit's snippet ids, the human changes' ids.
    sent = [r.body["generationConfig"].get("responseJsonSchema") for r in harness.fake.requests]
    guard = next(s for s in sent if s and s.get("title") == "GuardOutput")
    assert guard["$defs"]["GuardVerdict"]["properties"]["id"]["enum"]
    rebuild = [s for s in sent if s and s.get("title") == "RebuildReply"][-1]
    assert rebuild["$defs"]["HumanChangeAnswer"]["properties"]["id"]["enum"] == [
        "h1",
        "h2",
        "h3",
        "h4",
    ]


def _without_ids(schema: dict) -> dict:
    """A response schema as it was sent before issue 21: the static class's, no ids in it."""
    return json.loads(
        json.dumps(schema),
        object_hook=lambda node: {
            k: v for k, v in node.items() if k not in (schemas.NAMES, schemas.ONE_EACH)
        },
    )


def test_without_the_ids_in_the_schema_the_same_model_fails_the_guard_and_the_audit():
    """The control: the same schema-only answers, from the schemas without their ids, break
    the guard's and the audit's rules as the issue saw (every item failed after its repairs);
    from the schemas with the call's ids, they keep them."""
    candidates = [21, 22, 23]
    static = GuardOutput.model_validate(
        schema_answer(_without_ids(schemas.json_schema(GuardOutput)), CONTENT)
    )
    assert guard_problems(static, frozenset(candidates)) == [
        "give exactly one verdict per candidate id [21, 22, 23], got []",
        "selected 1 is not one of the candidate ids",
    ]
    sent = schemas.response_schema(GuardOutput, schemas.id_sets({"candidates": candidates}))
    answer = GuardOutput.model_validate(schema_answer(sent, CONTENT))
    assert guard_problems(answer, frozenset(candidates)) == []
    assert [v.id for v in answer.verdicts] == candidates and answer.selected == 21

    snippets, items = ["s1", "s2", "s3"], {"I1", "I2"}
    static_audit = AuditReply.model_validate(
        schema_answer(_without_ids(schemas.json_schema(AuditReply)), CONTENT)
    )
    assert audit_problems(snippets, items, static_audit) == [
        "verdicts: no verdict for s1, s2, s3; give one per snippet"
    ]
    sent = schemas.response_schema(
        AuditReply, schemas.id_sets({"snippets": snippets, "items": sorted(items)})
    )
    assert audit_problems(snippets, items, AuditReply.model_validate(schema_answer(sent))) == []
