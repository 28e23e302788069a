"""Fill the database that DATABASE_URL selects with rubrics waiting for their first human round.

    DATABASE_URL=postgres://... .venv/bin/python bench/generate_rubric_data.py [--reset]

What it writes (defaults):
  * --questions 200 final questions, each on its own image (all sharing the small JPEG that
    generate_review_data.py writes under MEDIA_ROOT/images/) with an accepted LLM candidate,
    made directly with bulk_create (stage 1 is not what this benchmark measures);
  * for each question a rubric of two versions, both made with
    rubrics.services.rubric_version_create: llm_draft, then llm_refined_1 (the latest, which
    waits for human round 1). The refined version's meta-rubric is generated from the items of
    bench/compile_rubrics.py (facts, a strict list, two flexible lists, a process, a
    relationship, meta-insights) topped up with strict lists and facts until it compiles to
    --checks 60 checks exactly; the draft is the same document without its last item;
  * 10 revisers (bench-reviser-01..10, group "rubric_reviser") sharing one random password,
    written with the user names to bench/out/revisers.json (mode 600) for workspace_load.py.

It refuses to run when the database has rubrics already, unless --reset is given: --reset
empties the rubric tables (TRUNCATE on PostgreSQL, deletes on SQLite) and removes the questions,
candidates and images that an earlier run of this script made (source ids "bench-rubric-...").
Nothing else is touched: --reset refuses when rows of other tables (judging's verdicts, say)
point at rubric rows or at those questions. On PostgreSQL the tables are ANALYZEd at the end, as
autovacuum would.
Deterministic for a given --seed, apart from the password.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

from compile_rubrics import generate, members, phrase  # noqa: E402
from django.apps import apps  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from generate_review_data import DOMAINS, ENTITIES, QUESTIONS, shared_photo  # noqa: E402

from annotation.models import (  # noqa: E402
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    FinalQuestion,
    Image,
    ImportBatch,
    Popularity,
)
from core.access import RUBRIC_REVISER  # noqa: E402
from rubrics.compiler import TIERS, compile_document  # noqa: E402
from rubrics.models import Rubric, Stage  # noqa: E402
from rubrics.services import rubric_version_create  # noqa: E402

N_REVISERS = 10
SOURCE_PREFIX = "bench-rubric-"
USERNAME = "bench-reviser-{:02d}"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--questions",
        type=int,
        default=200,
        help="final questions, each with a rubric (default 200)",
    )
    parser.add_argument(
        "--checks",
        type=int,
        default=60,
        help="checks of each llm_refined_1 version (default 60; at least "
        "what the base document compiles to, 29-41)",
    )
    parser.add_argument("--revisers", type=int, default=N_REVISERS)
    parser.add_argument("--seed", type=int, default=20240602)
    parser.add_argument(
        "--reset",
        action="store_true",
        help="empty the rubric tables and this script's questions first "
        "(refused when rubrics exist without it)",
    )
    parser.add_argument("--credentials", type=Path, default=BENCH_DIR / "out" / "revisers.json")
    args = parser.parse_args(argv)
    if not 1 <= args.questions <= 100_000:
        parser.error("--questions must be between 1 and 100000")
    if not 1 <= args.checks <= 500:
        parser.error("--checks must be between 1 and 500")
    if not 1 <= args.revisers <= 99:
        parser.error("--revisers must be between 1 and 99")
    return args


# --- meta-rubrics ---------------------------------------------------------------------------


def meta_rubric(rng: random.Random, checks: int) -> dict[str, Any]:
    """compile_rubrics.generate's document (29-41 checks), topped up to `checks` checks with
    strict lists of 4-7 members (one check each) and, for the last few, facts."""
    document = generate(rng)
    items = document["items"]
    snippets = [s["id"] for s in document["snippets"]]
    count = len(compile_document(document))
    # Bounded: every pass adds at least one check.
    for _ in range(max(0, checks - count)):
        missing = checks - count
        if missing <= 0:
            break
        base = {"id": f"I{len(items) + 1}", "snippets": rng.sample(snippets, rng.randint(0, 2))}
        if missing >= 4:
            size = min(missing, rng.randint(4, 7))
            items.append(
                {
                    **base,
                    "type": "strict_list",
                    "tier": rng.choice(TIERS),
                    "topic": phrase(rng, 3),
                    "items": members(rng, "m", size),
                }
            )
            count += size
        else:
            items.append(
                {**base, "type": "fact", "tier": rng.choice(TIERS), "statement": phrase(rng, 10)}
            )
            count += 1
    return document


# --- reset ----------------------------------------------------------------------------------


def reset_blockers() -> list[str]:
    """Rows outside the rubric tables that --reset would delete: TRUNCATE ... CASCADE empties
    every table that references a rubric table, directly or through another such table
    (judging's verdicts and tier counts, ...), so those must be empty; and nothing may point at
    this script's questions, candidates and images. --reset refuses while there are any."""
    rubric_models = set(apps.get_app_config("rubrics").get_models())
    mine = {
        Image: Image.objects.filter(source_id__startswith=SOURCE_PREFIX),
        Candidate: Candidate.objects.filter(image__source_id__startswith=SOURCE_PREFIX),
        FinalQuestion: FinalQuestion.objects.filter(image__source_id__startswith=SOURCE_PREFIX),
    }

    def keys(model):
        return [
            f for f in model._meta.get_fields() if (f.many_to_one or f.one_to_one) and f.concrete
        ]

    cascaded: set = set()
    # Bounded: each pass adds at least one model or stops.
    for _ in range(len(apps.get_models()) + 1):
        more = {
            m
            for m in apps.get_models()
            if m not in rubric_models | cascaded
            and any(f.related_model in rubric_models | cascaded for f in keys(m))
        }
        if not more:
            break
        cascaded |= more
    found = [f"{m._meta.label} (would be emptied)" for m in cascaded if m.objects.exists()]
    for model in apps.get_models():
        if model in rubric_models | cascaded or model in mine:
            continue
        for f in keys(model):
            if (
                f.related_model in mine
                and model.objects.filter(**{f"{f.name}__in": mine[f.related_model]}).exists()
            ):
                found.append(f"{model._meta.label}.{f.name}")
    return found


def reset() -> None:
    blockers = reset_blockers()
    if blockers:
        raise SystemExit(
            "--reset would delete rows that point at the rubrics or at this "
            f"script's questions ({', '.join(blockers)}); not resetting."
        )
    models = list(apps.get_app_config("rubrics").get_models())
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # CASCADE reaches only the tables that reset_blockers found empty.
            tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        else:
            # Children first: every foreign key between rubric tables is PROTECT.
            from rubrics.models import CheckEdit, RevisionClaim, RubricCheck, RubricVersion

            for model in (CheckEdit, RevisionClaim, RubricCheck):
                model.objects.all().delete()
            RubricVersion.objects.update(parent=None)
            RubricVersion.objects.all().delete()
            Rubric.objects.all().delete()
        mine = Image.objects.filter(source_id__startswith=SOURCE_PREFIX)
        FinalQuestion.objects.filter(image__in=mine).delete()
        Candidate.objects.filter(image__in=mine).delete()
        batches = set(mine.values_list("import_batch_id", flat=True))
        mine.delete()
        ImportBatch.objects.filter(pk__in=batches - {None}, images__isnull=True).delete()


# --- writing --------------------------------------------------------------------------------


def revisers(count: int, password: str) -> list[User]:
    group = Group.objects.get(name=RUBRIC_REVISER)  # created by migration 0002
    hashed = make_password(password)  # once: a hash costs ~0.3 s of CPU
    people = []
    for i in range(1, count + 1):
        user, _ = User.objects.get_or_create(username=USERNAME.format(i))
        user.password = hashed
        user.save(update_fields=["password"])
        user.groups.add(group)
        people.append(user)
    return people


def questions(rng: random.Random, count: int, now) -> list[FinalQuestion]:
    photo = shared_photo()
    batch = ImportBatch.objects.create(
        source=ImportBatch.Source.COMMAND,
        file_name="bench/generate_rubric_data.py",
        imported=count,
        created_at=now - timedelta(days=20),
    )
    images = Image.objects.bulk_create(
        [
            Image(
                source_id=f"{SOURCE_PREFIX}{i:05d}",
                file=photo,
                entity=f"{rng.choice(ENTITIES)} {i}",
                domain=rng.choice(DOMAINS),
                popularity=rng.choice(Popularity.values),
                import_batch=batch,
                created_at=now - timedelta(days=20),
            )
            for i in range(1, count + 1)
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
                created_at=now - timedelta(days=15),
                resolved_at=now - timedelta(days=10),
            )
            for image in images
        ],
        batch_size=2000,
    )
    return FinalQuestion.objects.bulk_create(
        [
            FinalQuestion(
                image=c.image,
                candidate=c,
                text=c.text,
                method=FinalQuestion.Method.GUARD,
                created_at=now - timedelta(days=9),
            )
            for c in candidates
        ],
        batch_size=2000,
    )


def write_credentials(path: Path, people: list[User], password: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(
        json.dumps({"password": password, "revisers": [u.username for u in people]}, indent=1)
        + "\n"
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if Rubric.objects.exists() and not args.reset:
        print(
            f"The database ({connection.vendor}, {connection.settings_dict['NAME']}) has "
            f"{Rubric.objects.count()} rubrics already; give --reset to empty the rubric "
            "tables first.",
            file=sys.stderr,
        )
        return 2
    if args.reset:
        reset()
    rng = random.Random(args.seed)
    password = secrets.token_urlsafe(18)
    now = timezone.now()
    checks = versions = 0
    with transaction.atomic():
        people = revisers(args.revisers, password)
        made = questions(rng, args.questions, now)
        for question in made:
            refined = meta_rubric(rng, args.checks)
            draft = {**refined, "items": refined["items"][:-1]}
            for stage, document, at in (
                (Stage.LLM_DRAFT, draft, now - timedelta(days=8)),
                (Stage.LLM_REFINED_1, refined, now - timedelta(days=7)),
            ):
                version = rubric_version_create(
                    question=question,
                    meta_document=document,
                    stage=stage,
                    made_by_model="bench",
                    now=at,
                )
                versions += 1
            checks += version.checks.count()
    if connection.vendor == "postgresql":
        from rubrics.models import CheckEdit, RevisionClaim, RubricCheck, RubricVersion

        with connection.cursor() as cursor:
            for model in (
                Image,
                Candidate,
                FinalQuestion,
                Rubric,
                RubricVersion,
                RubricCheck,
                CheckEdit,
                RevisionClaim,
                User,
            ):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    write_credentials(args.credentials, people, password)
    print(
        json.dumps(
            {
                "questions": len(made),
                "versions": versions,
                "checks_per_refined_version": round(checks / max(1, len(made)), 1),
                "revisers": f"{people[0].username}..{people[-1].username[-2:]}",
                "credentials": str(args.credentials),
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
