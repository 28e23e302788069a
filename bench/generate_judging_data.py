"""Fill the database that DATABASE_URL selects with a full-size judged result set.

    DATABASE_URL=postgres://... .venv/bin/python bench/generate_judging_data.py [--reset]

What it writes (defaults, about 1.8 million verdicts):
  * --questions 1813 final questions, each on its own image (all sharing the small JPEG that
    generate_review_data.py writes under MEDIA_ROOT/images/) with an accepted LLM candidate;
    --dropped 0.5 % of them dropped. Domains are generate_review_data's eight, popularity
    30 % head, 40 % torso, 30 % tail;
  * for each question a rubric whose final version (the latest frozen one, stage human_2) has
    --checks 35 checks: the first answer_critical, the others 25 % answer_critical, 45 %
    valuable, 30 % context. --edited 2 % of the rubrics also have an earlier frozen version
    (human_1) that was judged before three of its checks were reworded: its verdicts and
    counts are in the tables and must not be scored;
  * --models 14 evaluated models (bench-model-01..14, from strongest to weakest), each with a
    response to every question in both settings (multimodal and text-only), except --missing
    0.5 % of (model, setting, question) that were never collected;
  * --judges 1 judges (bench-judge-1..), each with a verdict on every check of every frozen
    version of every response's question, except --pending 0.2 % of the responses, whose final
    version the judge has judged only in part (not scored until complete);
  * the verdict mix: the chance of `meets` is a logistic function of the model's strength
    (text-only a little lower), the question's difficulty (tail entities harder), the check's
    own difficulty, its tier (answer_critical checks met more often) and the judge's leniency:
    about 51 % in multimodal and 44 % in text-only; the rest is 40 % partially_meets, 45 %
    missing, 15 % contradicts (in text-only, where the entity is sometimes misidentified, 25 %
    contradicts and the other two in the same proportion). Gamut x100 then runs from about 65
    (the strongest model, multimodal) down to about 12 (the weakest, text-only). --failed
    0.02 % of verdicts are `failed` (about 0.7 % of responses then have a failed verdict). An
    unchanged check of an edited rubric has the same key and verdict in both versions, as
    verdict_find's reuse leaves it;
  * one ResponseTierCount row per (judge, response, rubric version, tier) that has a verdict,
    with the counts of each verdict: exactly the rows judging.verdicts.services.verdict_record would
    have left after recording the same verdicts one by one; and the check report's per-check
    counts (CheckVerdictCount, CheckAgreement), from the verdicts with check_tallies_rebuild.

The image, candidate, question and rubric rows go in with bulk_create. The verdicts and the
counts, which verdict_record cannot write at this size, go in with one executemany per block
on SQLite and COPY on PostgreSQL, in the same transaction as everything else; keys are
judging.verdicts.services.verdict_key of each verdict's judge, template and what its prompt shows.

It refuses to run when the database has final questions or judging rows already, unless
--reset is given: --reset empties the judging tables (TRUNCATE on PostgreSQL, deletes on
SQLite) and removes the rubrics, questions, candidates and images that an earlier run of this
script made (source ids "bench-judging-..."). It still refuses when other final questions
remain (the leaderboard would count them as missing for every model), or when rows of other
apps point at the judging tables. On PostgreSQL the tables are ANALYZEd at the end, as
autovacuum would. Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from compile_rubrics import WORDS  # noqa: E402
from django.apps import apps  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.models import ProtectedError, QuerySet, RestrictedError  # noqa: E402
from django.utils import timezone  # noqa: E402
from generate_review_data import DOMAINS, ENTITIES, QUESTIONS, shared_photo  # noqa: E402
from tqdm import tqdm  # noqa: E402

from annotation.models import (  # noqa: E402
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    FinalQuestion,
    Image,
    ImportBatch,
)
from judging.models import (  # noqa: E402
    EvaluatedModel,
    Judge,
    Response,
    ResponseTierCount,
    Setting,
    Verdict,
    VerdictValue,
)
from judging.verdicts.services import check_tallies_rebuild, verdict_key  # noqa: E402
from rubrics.models import Rubric, RubricCheck, RubricVersion, Stage  # noqa: E402

SOURCE_PREFIX = "bench-judging-"
TIERS = ("answer_critical", "valuable", "context")
TIER_SHARE = (0.25, 0.45, 0.30)
TIER_SHIFT = np.array([0.35, -0.05, -0.35])  # answer_critical checks are met more often
POPULARITY = (("head", 0.3, 0.0), ("torso", 0.4, 0.15), ("tail", 0.3, 0.45))  # share, shift
# Verdict codes, in the order of ResponseTierCount's count columns.
CODES = (
    VerdictValue.MEETS,
    VerdictValue.PARTIALLY_MEETS,
    VerdictValue.MISSING,
    VerdictValue.CONTRADICTS,
    VerdictValue.FAILED,
)
COUNT_COLUMNS = ("meets", "partially", "missing", "contradicts", "failed")
FAILED_CODE = 4
RATIONALES = {
    VerdictValue.MEETS: "The response states this plainly and correctly.",
    VerdictValue.PARTIALLY_MEETS: "The response touches on this but leaves part of it out.",
    VerdictValue.MISSING: "The response does not mention this.",
    VerdictValue.CONTRADICTS: "The response says the opposite of this.",
    VerdictValue.FAILED: "",
}
TEMPLATE_VERSION = hashlib.sha256(b"bench judge template v1").hexdigest()[:16]
EDITED_CHECKS = 3


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1813)
    parser.add_argument("--models", type=int, default=14)
    parser.add_argument(
        "--checks", type=int, default=35, help="checks of each final rubric version (default 35)"
    )
    parser.add_argument("--judges", type=int, default=1)
    parser.add_argument(
        "--missing",
        type=float,
        default=0.005,
        help="share of (model, setting, question) without a response",
    )
    parser.add_argument(
        "--pending",
        type=float,
        default=0.002,
        help="share of responses a judge has judged only in part",
    )
    parser.add_argument(
        "--failed", type=float, default=0.0002, help="share of verdicts that failed"
    )
    parser.add_argument(
        "--edited",
        type=float,
        default=0.02,
        help="share of rubrics with an earlier, judged frozen version",
    )
    parser.add_argument("--dropped", type=float, default=0.005, help="share of questions dropped")
    parser.add_argument("--seed", type=int, default=20240603)
    parser.add_argument(
        "--reset",
        action="store_true",
        help="empty the judging tables and this script's questions first "
        "(refused when there is data without it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    for name, low, high in (
        ("questions", 1, 100_000),
        ("models", 1, 200),
        ("checks", 1, 500),
        ("judges", 1, 20),
    ):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name} must be between {low} and {high}")
    for name in ("missing", "pending", "failed", "edited", "dropped"):
        if not 0 <= getattr(args, name) < 1:
            parser.error(f"--{name} must be a share in [0, 1)")
    if args.edited and args.checks < EDITED_CHECKS:
        parser.error(f"--edited needs --checks {EDITED_CHECKS} or more")
    return args


# --- reset ----------------------------------------------------------------------------------


def judging_models() -> list:
    """Every model of the judging app, including any added after this script was written."""
    return list(apps.get_app_config("judging").get_models())


def mine() -> dict:
    images = Image.objects.filter(source_id__startswith=SOURCE_PREFIX)
    return {
        "images": images,
        "questions": FinalQuestion.objects.filter(image__in=images),
        "versions": RubricVersion.objects.filter(rubric__question__image__in=images),
    }


def blockers() -> list[str]:
    """What --reset may not delete: rows of other apps that point at judging tables, and
    final questions this script did not make."""
    judging = set(judging_models())
    found = []
    for model in apps.get_models():
        if model in judging:
            continue
        for f in model._meta.get_fields():
            if (
                (f.many_to_one or f.one_to_one)
                and f.concrete
                and f.related_model in judging
                and model._default_manager.filter(**{f"{f.name}__isnull": False}).exists()
            ):
                found.append(f"{model._meta.label}.{f.name}")
    others = FinalQuestion.objects.exclude(image__source_id__startswith=SOURCE_PREFIX).count()
    if others:
        found.append(
            f"{others} final questions this script did not make (the leaderboard "
            "would count them as missing for every model)"
        )
    return found


def reset() -> None:
    found = blockers()
    if found:
        raise SystemExit(
            f"--reset would leave or delete rows it should not ({'; '.join(found)}); not resetting."
        )
    with transaction.atomic():
        if connection.vendor == "postgresql":
            tables = ", ".join(
                connection.ops.quote_name(m._meta.db_table) for m in judging_models()
            )
            with connection.cursor() as cursor:
                # Rows written earlier in this same transaction (a test's) leave deferred
                # foreign-key checks pending, and PostgreSQL refuses to TRUNCATE under them:
                # run those checks now.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                # CASCADE reaches only tables that blockers() found empty.
                cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        else:
            # Children first: every foreign key of the judging tables is PROTECT. Verdicts
            # before the rest; a model added later falls to the loop's second pass.
            remaining = [Verdict, ResponseTierCount] + [
                m for m in judging_models() if m not in (Verdict, ResponseTierCount)
            ]
            for _ in range(len(remaining) + 1):
                blocked = []
                for model in remaining:
                    try:
                        with transaction.atomic():
                            # A plain QuerySet: a release's manager refuses to delete
                            # (releases never change), but --reset empties a bench database.
                            QuerySet(model).delete()
                    except (ProtectedError, RestrictedError, IntegrityError):
                        blocked.append(model)
                remaining = blocked
                if not remaining:
                    break
            if remaining:
                raise SystemExit(f"--reset could not empty {[m.__name__ for m in remaining]}")
        rows = mine()
        from rubrics.models import CheckEdit, RevisionClaim

        CheckEdit.objects.filter(version__in=rows["versions"]).delete()
        RevisionClaim.objects.filter(version__in=rows["versions"]).delete()
        RubricCheck.objects.filter(version__in=rows["versions"]).delete()
        rows["versions"].update(parent=None)
        rows["versions"].delete()
        Rubric.objects.filter(question__in=rows["questions"]).delete()
        batches = set(rows["images"].values_list("import_batch_id", flat=True))
        rows["questions"].delete()
        Candidate.objects.filter(image__in=rows["images"]).delete()
        rows["images"].delete()
        ImportBatch.objects.filter(pk__in=batches - {None}, images__isnull=True).delete()


# --- questions and rubrics ------------------------------------------------------------------


def phrase(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Rubrics:
    """The questions and their frozen versions, as arrays aligned with `questions`."""

    def __init__(
        self,
        questions: list[FinalQuestion],
        final_ids: np.ndarray,
        final_tiers: np.ndarray,
        final_texts: list[list[str]],
        difficulty: np.ndarray,
        easiness: np.ndarray,
        edited: dict[int, tuple[list[int], list[str], set[int]]],
    ):
        self.questions = questions
        self.final_ids = final_ids  # (questions, checks) check row ids of the final version
        self.final_tiers = final_tiers  # (questions, checks) tier codes
        self.final_texts = final_texts
        self.difficulty = difficulty  # (questions,)
        self.easiness = easiness  # (questions, checks)
        # question index -> (old version's check ids, their texts, reworded positions)
        self.edited = edited
        self.final_versions: list[int] = []
        self.old_versions: dict[int, int] = {}


def make_questions(rng: random.Random, nrng: np.random.Generator, args, now) -> Rubrics:
    photo = shared_photo()
    n, k = args.questions, args.checks
    batch = ImportBatch.objects.create(
        source=ImportBatch.Source.COMMAND,
        file_name="bench/generate_judging_data.py",
        imported=n,
        created_at=now - timedelta(days=60),
    )
    popularity = [
        rng.choices([p for p, _, _ in POPULARITY], weights=[w for _, w, _ in POPULARITY])[0]
        for _ in range(n)
    ]
    images = Image.objects.bulk_create(
        [
            Image(
                source_id=f"{SOURCE_PREFIX}{i:05d}",
                file=photo,
                entity=f"{rng.choice(ENTITIES)} {i}",
                domain=rng.choice(DOMAINS),
                popularity=popularity[i - 1],
                import_batch=batch,
                created_at=now - timedelta(days=60),
            )
            for i in range(1, n + 1)
        ],
        batch_size=2000,
    )
    candidates = Candidate.objects.bulk_create(
        [
            Candidate(
                image=image,
                text=rng.choice(QUESTIONS).format(e=image.entity.lower()),
                origin=CandidateOrigin.LLM,
                status=CandidateStatus.ACCEPTED,
                created_at=now - timedelta(days=55),
                resolved_at=now - timedelta(days=50),
            )
            for image in images
        ],
        batch_size=2000,
    )
    dropped = set(rng.sample(range(n), round(n * args.dropped)))
    questions = FinalQuestion.objects.bulk_create(
        [
            FinalQuestion(
                image=c.image,
                candidate=c,
                text=c.text,
                method=FinalQuestion.Method.GUARD,
                created_at=now - timedelta(days=49),
                dropped_at=now - timedelta(days=1) if i in dropped else None,
                drop_reason="no sound rubric (bench)" if i in dropped else "",
            )
            for i, c in enumerate(candidates)
        ],
        batch_size=2000,
    )
    rubrics = Rubric.objects.bulk_create(
        [Rubric(question=q, created_at=now - timedelta(days=48)) for q in questions],
        batch_size=2000,
    )
    edited_idx = sorted(rng.sample(range(n), round(n * args.edited)))
    meta: dict[str, list] = {"items": [], "snippets": []}
    old_versions = dict(
        zip(
            edited_idx,
            RubricVersion.objects.bulk_create(
                [
                    RubricVersion(
                        rubric=rubrics[i],
                        stage=Stage.HUMAN_1,
                        meta_rubric=meta,
                        made_by_model="bench",
                        created_at=now - timedelta(days=40),
                        frozen_at=now - timedelta(days=39),
                    )
                    for i in edited_idx
                ],
                batch_size=2000,
            ),
            strict=True,
        )
    )
    finals = RubricVersion.objects.bulk_create(
        [
            RubricVersion(
                rubric=r,
                stage=Stage.HUMAN_2,
                meta_rubric=meta,
                made_by_model="bench",
                parent=old_versions.get(i),
                created_at=now - timedelta(days=30),
                frozen_at=now - timedelta(days=29),
            )
            for i, r in enumerate(rubrics)
        ],
        batch_size=2000,
    )

    tiers = nrng.choice(3, size=(n, k), p=TIER_SHARE)
    tiers[:, 0] = 0  # every question has an answer-critical check
    texts = [
        [f"States that {images[i].entity.lower()} {phrase(rng, 6)} (c{j + 1})" for j in range(k)]
        for i in range(n)
    ]
    shifts = {p: s for p, _, s in POPULARITY}
    difficulty = nrng.normal(0, 0.6, size=n) + np.array([shifts[p] for p in popularity])
    easiness = nrng.normal(0, 0.8, size=(n, k))

    def check_rows(version, tier_codes, check_texts):
        return [
            RubricCheck(
                version=version,
                position=j,
                check_id=f"C{j + 1}",
                kind="fact",
                tier=TIERS[t],
                source=f"I{j + 1}",
                rule="fact",
                text=text,
            )
            for j, (t, text) in enumerate(zip(tier_codes, check_texts, strict=True))
        ]

    edited: dict[int, tuple[list[int], list[str], set[int]]] = {}
    old_texts = {}
    for i in edited_idx:
        reworded = set(rng.sample(range(k), EDITED_CHECKS))
        old_texts[i] = [
            f"{t} (before the edit)" if j in reworded else t for j, t in enumerate(texts[i])
        ]
        edited[i] = ([], old_texts[i], reworded)
    rows = [row for i in edited_idx for row in check_rows(old_versions[i], tiers[i], old_texts[i])]
    made = RubricCheck.objects.bulk_create(rows, batch_size=2000)
    for n_i, i in enumerate(edited_idx):
        edited[i][0].extend(c.pk for c in made[n_i * k : (n_i + 1) * k])
    rows = [row for i in range(n) for row in check_rows(finals[i], tiers[i], texts[i])]
    made = RubricCheck.objects.bulk_create(rows, batch_size=2000)
    final_ids = np.array([c.pk for c in made], dtype=np.int64).reshape(n, k)
    result = Rubrics(questions, final_ids, tiers, texts, difficulty, easiness, edited)
    result.final_versions = [v.pk for v in finals]
    result.old_versions = {i: v.pk for i, v in old_versions.items()}
    return result


# --- models, responses, judges --------------------------------------------------------------


def make_models(count: int) -> tuple[list[EvaluatedModel], np.ndarray]:
    models = EvaluatedModel.objects.bulk_create(
        [
            EvaluatedModel(name=f"bench-model-{i:02d}", provider="bench", model_name=f"bench-{i}")
            for i in range(1, count + 1)
        ]
    )
    strength = np.linspace(1.1, -0.5, count) if count > 1 else np.array([0.5])
    return models, strength


def make_responses(
    rng: random.Random, args, rubrics: Rubrics, models, now
) -> dict[tuple[int, str], tuple[np.ndarray, list[str]]]:
    """(model index, setting) -> (response id per question or -1, response text per question)."""
    n = len(rubrics.questions)
    plan = []
    for m, model in enumerate(models):
        for setting in Setting.values:
            for i, q in enumerate(rubrics.questions):
                if rng.random() >= args.missing:
                    text = (
                        f"{model.name} ({setting}) on question {q.pk}: this looks like "
                        f"{phrase(rng, 3)}; {phrase(rng, 12)}."
                    )
                    plan.append(
                        (
                            m,
                            setting,
                            i,
                            Response(
                                model=model,
                                question=q,
                                setting=setting,
                                text=text,
                                model_version=f"{model.model_name}-2025-01",
                                input_tokens=rng.randint(300, 1500),
                                output_tokens=rng.randint(150, 900),
                                latency_ms=rng.randint(800, 20_000),
                                created_at=now - timedelta(days=20),
                            ),
                        )
                    )
    made = Response.objects.bulk_create([r for *_, r in plan], batch_size=2000)
    out: dict[tuple[int, str], tuple[np.ndarray, list[str]]] = {
        (m, s): (np.full(n, -1, dtype=np.int64), [""] * n)
        for m in range(len(models))
        for s in Setting.values
    }
    for (m, setting, i, _), response in zip(plan, made, strict=True):
        ids, texts = out[(m, setting)]
        ids[i] = response.pk
        texts[i] = response.text
    return out


def make_judges(count: int) -> tuple[list[Judge], np.ndarray]:
    judges = Judge.objects.bulk_create(
        [Judge(name=f"bench-judge-{i}") for i in range(1, count + 1)]
    )
    leniency = np.array([0.0, 0.25, -0.2, 0.1, -0.1] * 4)[:count]
    return judges, leniency


# --- verdicts and counts --------------------------------------------------------------------


def draw(
    nrng: np.random.Generator, logits: np.ndarray, text_only: bool, failed: float
) -> np.ndarray:
    """Verdict codes (0 meets .. 4 failed) for an array of logits."""
    meets = nrng.random(logits.shape) < 1 / (1 + np.exp(-logits))
    contradicts = 0.25 if text_only else 0.15
    other = (
        nrng.choice(
            3,
            size=logits.shape,
            p=[0.4 * (1 - contradicts) / 0.85, 0.45 * (1 - contradicts) / 0.85, contradicts],
        )
        + 1
    )
    codes = np.where(meets, 0, other)
    codes[nrng.random(logits.shape) < failed] = FAILED_CODE
    return codes


class Writer:
    """Appends verdict and count rows: executemany on SQLite, COPY on PostgreSQL."""

    def __init__(self):
        self.verdict_columns = [
            "judge",
            "response",
            "check_row",
            "verdict",
            "rationale",
            "template_version",
            "judge_model_version",
            "key",
            "created_at",
        ]
        self.count_columns = ["judge", "response", "version", "tier", *COUNT_COLUMNS]

    @staticmethod
    def _write(model, fields: Sequence[str], rows: list[tuple]) -> None:
        if not rows:
            return
        table = connection.ops.quote_name(model._meta.db_table)
        columns = ", ".join(
            connection.ops.quote_name(model._meta.get_field(f).column) for f in fields
        )
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                marks = ", ".join(["%s"] * len(fields))
                cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)

    def verdicts(self, rows: list[tuple]) -> None:
        self._write(Verdict, self.verdict_columns, rows)

    def counts(self, rows: list[tuple]) -> None:
        self._write(ResponseTierCount, self.count_columns, rows)


def judge_block(
    nrng: np.random.Generator,
    args,
    rubrics: Rubrics,
    judge: Judge,
    leniency: float,
    strength: float,
    setting: str,
    response_ids: np.ndarray,
    response_texts: list[str],
    created_at,
) -> tuple[list[tuple], list[tuple]]:
    """One judge's verdicts on one model's responses in one setting, and their counts."""
    rows = np.flatnonzero(response_ids >= 0)
    k = rubrics.final_ids.shape[1]
    text_only = setting == Setting.TEXT_ONLY
    base = strength - (0.35 if text_only else 0.0) + leniency
    logits = (
        base
        - rubrics.difficulty[rows, None]
        + rubrics.easiness[rows]
        + TIER_SHIFT[rubrics.final_tiers[rows]]
    )
    codes = draw(nrng, logits, text_only, args.failed)
    judged = np.full(len(rows), k)
    pending = nrng.random(len(rows)) < args.pending
    if k > 1:
        judged[pending] = nrng.integers(1, k, size=int(pending.sum()))
    model_version = f"{judge.name}-2025-06"
    verdicts: list[tuple] = []
    counts: list[tuple] = []

    def add(
        response_id: int,
        response_text: str,
        version: int,
        check_ids,
        tier_codes,
        check_texts,
        verdict_codes,
        n: int,
        question: FinalQuestion,
    ) -> None:
        tally = np.zeros((3, 5), dtype=np.int64)
        shown = {
            "question": question.text,
            "response": response_text,
            "photo": "" if text_only else question.image.file.name,
        }
        for j in range(n):
            code = int(verdict_codes[j])
            verdict = CODES[code]
            tally[tier_codes[j], code] += 1
            verdicts.append(
                (
                    judge.pk,
                    response_id,
                    int(check_ids[j]),
                    verdict.value,
                    RATIONALES[verdict],
                    TEMPLATE_VERSION,
                    model_version,
                    verdict_key(
                        judge=judge,
                        template_version=TEMPLATE_VERSION,
                        inputs={**shown, "tier": TIERS[tier_codes[j]], "check": check_texts[j]},
                    ),
                    created_at,
                )
            )
        for t in range(3):
            if tally[t].any():
                counts.append(
                    (judge.pk, response_id, version, TIERS[t], *(int(x) for x in tally[t]))
                )

    for r, i in enumerate(rows.tolist()):
        response_id, text = int(response_ids[i]), response_texts[i]
        tier_codes = rubrics.final_tiers[i]
        if i in rubrics.edited:
            old_ids, old_texts, reworded = rubrics.edited[i]
            old_codes = codes[r].copy()
            # A reworded check, or one whose new verdict failed (failed verdicts are never
            # reused), had its own verdict before the edit.
            fresh = [j for j in range(k) if j in reworded or old_codes[j] == FAILED_CODE]
            old_codes[fresh] = draw(nrng, logits[r, fresh], text_only, 0.0)
            add(
                response_id,
                text,
                rubrics.old_versions[i],
                old_ids,
                tier_codes,
                old_texts,
                old_codes,
                k,
                rubrics.questions[i],
            )
        add(
            response_id,
            text,
            rubrics.final_versions[i],
            rubrics.final_ids[i],
            tier_codes,
            rubrics.final_texts[i],
            codes[r],
            int(judged[r]),
            rubrics.questions[i],
        )
    return verdicts, counts


# --- main -----------------------------------------------------------------------------------


def analyze() -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in (
            Image,
            Candidate,
            FinalQuestion,
            Rubric,
            RubricVersion,
            RubricCheck,
            *judging_models(),
        ):
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    has_data = FinalQuestion.objects.exists() or any(
        m._default_manager.exists() for m in judging_models()
    )
    if has_data and not args.reset:
        print(
            f"The database ({connection.vendor}, {connection.settings_dict['NAME']}) has "
            "final questions or judging rows already; give --reset to empty the judging "
            "tables and this script's questions first.",
            file=sys.stderr,
        )
        return 2
    if args.reset:
        reset()
    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    now = timezone.now()
    created_at = connection.ops.adapt_datetimefield_value(now - timedelta(days=10))
    phases: dict[str, float] = {}
    writer = Writer()
    n_verdicts = n_counts = n_responses = 0
    with transaction.atomic():
        t = time.monotonic()
        rubrics = make_questions(rng, nrng, args, now)
        phases["questions and rubrics"] = time.monotonic() - t
        t = time.monotonic()
        models, strength = make_models(args.models)
        responses = make_responses(rng, args, rubrics, models, now)
        n_responses = sum(int((ids >= 0).sum()) for ids, _ in responses.values())
        judges, leniency = make_judges(args.judges)
        phases["responses"] = time.monotonic() - t
        t = time.monotonic()
        blocks = [
            (j, m, s)
            for j in range(len(judges))
            for m in range(len(models))
            for s in Setting.values
        ]
        # Every check of every frozen version of each response's question (pending
        # responses fall a little short).
        expected = (
            len(judges)
            * args.checks
            * sum(
                int((ids >= 0).sum()) + int((ids[list(rubrics.edited)] >= 0).sum())
                for ids, _ in responses.values()
            )
        )
        with tqdm(
            total=expected, unit=" verdicts", unit_scale=True, disable=args.quiet, desc="verdicts"
        ) as bar:
            for j, m, s in blocks:
                ids, texts = responses[(m, s)]
                verdicts, counts = judge_block(
                    nrng,
                    args,
                    rubrics,
                    judges[j],
                    leniency[j],
                    strength[m],
                    s,
                    ids,
                    texts,
                    created_at,
                )
                writer.verdicts(verdicts)
                writer.counts(counts)
                n_verdicts += len(verdicts)
                n_counts += len(counts)
                bar.update(len(verdicts))
        phases["verdicts and counts"] = time.monotonic() - t
        t = time.monotonic()
        # The per-check counts of the check report, as verdict_record keeps them.
        n_check_counts, n_agreements = check_tallies_rebuild()
        phases["check counts"] = time.monotonic() - t
    t = time.monotonic()
    analyze()
    if connection.vendor == "postgresql":
        phases["analyze"] = time.monotonic() - t
    print(
        json.dumps(
            {
                "database": f"{connection.vendor} {connection.settings_dict['NAME']}",
                "questions": len(rubrics.questions),
                "dropped": round(len(rubrics.questions) * args.dropped),
                "edited_rubrics": len(rubrics.edited),
                "checks_per_final_version": args.checks,
                "models": len(models),
                "settings": len(Setting.values),
                "judges": len(judges),
                "responses": n_responses,
                "verdicts": n_verdicts,
                "tier_count_rows": n_counts,
                "check_count_rows": n_check_counts,
                "check_agreement_rows": n_agreements,
                "phases_seconds": {k: round(v, 1) for k, v in phases.items()},
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
