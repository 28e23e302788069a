"""Fill the database that DATABASE_URL selects with stage-1 review data at full size.

    DATABASE_URL=postgres://... .venv/bin/python bench/generate_review_data.py [--reset]

What it writes (defaults):
  * 1,938 images sharing one small real JPEG written once under MEDIA_ROOT/images/;
  * --reviewed 6000 candidates with exactly two reviews each (so 12,000 reviews), by two
    different annotators, never the candidate's author or co-author, the status following
    the two decisions (accept+accept accepted, discard+discard discarded, identical
    revise+revise revised with a child candidate of round+1, anything else disputed); about
    60 % of the disputed ones adjudicated (accepted/discarded/revised, a revision making a
    child candidate of origin "adjudication");
  * an --open-pool of 6000 open candidates with no review, for review_load.py to claim: the
    revision children that were left unreviewed (they have annotators as authors, so the
    claim must skip them for those people) topped up with fresh LLM candidates. The load
    consumes (requests per second / 4) candidates a second (two requests per review, two
    reviews per candidate), so 6000 last 65 s (5 s warm-up + 60 s) up to ~370 requests per
    second; 2 cores serve about 150-220;
  * 30 annotators (bench-annotator-01..30, group "annotator") and 3 adjudicators, each with a
    DRF token; the annotators' tokens go to bench/out/tokens.json.

It refuses to run when the database has images already, unless --reset is given: --reset
empties the annotation tables (and the bench users' tokens) first. Rows go in with
bulk_create; on PostgreSQL the tables are ANALYZEd at the end, as autovacuum would.
Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

from django.apps import apps  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.models import ProtectedError, RestrictedError  # noqa: E402
from django.utils import timezone  # noqa: E402
from knox.models import AuthToken  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from annotation.candidates import normalize_text  # noqa: E402
from annotation.models import (  # noqa: E402
    REASON_KEYS,
    Adjudication,
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Image,
    ImportBatch,
    Popularity,
    Review,
)

N_ANNOTATORS = 30
N_ADJUDICATORS = 3
PHOTO_NAME = "images/bench-shared-photo.jpg"
DOMAINS = ["animals", "food", "vehicles", "people", "objects", "places", "plants", "art"]
ENTITIES = [
    "Tabby cat",
    "Cappuccino",
    "Falcon 9",
    "Eileen Collins",
    "Greek coin",
    "Hubble Deep Field",
    "Monstera",
    "Water lilies",
    "Beef bourguignon",
    "Red panda",
]
QUESTIONS = [
    "What is this {e}, and how did it come to look the way it does?",
    "Where is {e} usually found, and why there?",
    "How was {e} made, and who made it first?",
    "What is the history of {e}, and why does it matter today?",
    "Why is {e} famous, and what is often misunderstood about it?",
]
# Outcome of a pair of reviews of one candidate (before adjudication).
OUTCOMES = [("accepted", 0.50), ("discarded", 0.12), ("revised", 0.08), ("disputed", 0.30)]
DISPUTE_PAIRS = [
    ("accept", "discard"),
    ("accept", "revise"),
    ("revise", "discard"),
    ("revise", "revise"),
]  # revise+revise here means two different revisions
ADJUDICATED_SHARE = 0.6
CHILD_REVIEWED_SHARE = 0.5  # revision children that were reviewed in turn (the rest stay open)
MAX_ROUND = 3


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1938)
    parser.add_argument(
        "--reviewed",
        type=int,
        default=6000,
        help="candidates with two reviews (default 6000, i.e. 12000 reviews)",
    )
    parser.add_argument(
        "--open-pool",
        type=int,
        default=6000,
        help="open candidates with no review, for the load test (default 6000)",
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument(
        "--reset",
        action="store_true",
        help="empty the annotation tables first (refused when images exist without it)",
    )
    parser.add_argument("--tokens", type=Path, default=BENCH_DIR / "out" / "tokens.json")
    args = parser.parse_args(argv)
    for name in ("images", "reviewed", "open_pool"):
        if not 0 <= getattr(args, name) <= 1_000_000:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 1000000")
    if args.images < 1 and (args.reviewed or args.open_pool):
        parser.error("candidates need at least one image")
    return args


# --- people ---------------------------------------------------------------------------------


def bench_users() -> tuple[list[User], list[User]]:
    annotator_group = Group.objects.get(name="annotator")  # created by migration 0002
    adjudicator_group = Group.objects.get(name="adjudicator")

    def person(username: str, group: Group) -> User:
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.groups.add(group)
        return user

    annotators = [
        person(f"bench-annotator-{i:02d}", annotator_group) for i in range(1, N_ANNOTATORS + 1)
    ]
    adjudicators = [
        person(f"bench-adjudicator-{i}", adjudicator_group) for i in range(1, N_ADJUDICATORS + 1)
    ]
    return annotators, adjudicators


def write_tokens(path: Path, annotators: list[User]) -> None:
    """A fresh token per annotator, written where review_load.py reads them: only a hash of a
    token is stored, so a run's tokens replace the last run's."""
    AuthToken.objects.filter(user__in=annotators).delete()
    tokens = {u.username: AuthToken.objects.create(user=u, expiry=None)[1] for u in annotators}
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"username": u.username, "token": tokens[u.username]} for u in annotators]
    path.write_text(json.dumps({"annotators": rows}, indent=1) + "\n")
    path.chmod(0o600)


# --- reset ----------------------------------------------------------------------------------


def annotation_models() -> list:
    """Every model of the annotation app, including any added after this script was written."""
    return list(apps.get_app_config("annotation").get_models())


def reset() -> None:
    models = annotation_models()
    if connection.vendor == "postgresql":
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        return
    with transaction.atomic():
        Candidate.objects.update(parent=None)
        remaining = models
        # Delete what nothing protects, pass after pass: at most one pass per model.
        for _ in range(len(models) + 1):
            if not remaining:
                return
            blocked = []
            for model in remaining:
                try:
                    with transaction.atomic():
                        model.objects.all().delete()
                except (ProtectedError, RestrictedError, IntegrityError):
                    blocked.append(model)
            remaining = blocked
        raise SystemExit(f"--reset could not empty {[m.__name__ for m in remaining]}")


# --- the photo ------------------------------------------------------------------------------


def shared_photo() -> str:
    path = Path(settings.MEDIA_ROOT) / PHOTO_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        photo = PILImage.new("RGB", (64, 48), (180, 120, 60))
        for x in range(64):  # a gradient, so that it is a real, if dull, photo
            for y in range(48):
                photo.putpixel((x, y), (180, 60 + 3 * y, 40 + 3 * x))
        photo.save(buffer, format="JPEG", quality=80)
        path.write_bytes(buffer.getvalue())
    return PHOTO_NAME


# --- the plan -------------------------------------------------------------------------------


class Planned:
    """A candidate to insert, with its reviews and adjudication, before it has a primary key."""

    __slots__ = (
        "image",
        "text",
        "round",
        "parent",
        "origin",
        "author",
        "co_author",
        "status",
        "created_at",
        "resolved_at",
        "reviews",
        "adjudication",
        "row",
    )

    def __init__(self, image, text, round_, parent, origin, author, co_author, created_at):
        self.image, self.text, self.round, self.parent = image, text, round_, parent
        self.origin, self.author, self.co_author = origin, author, co_author
        self.status = CandidateStatus.OPEN
        self.created_at = created_at
        self.resolved_at = None
        self.reviews: list[dict] = []
        self.adjudication: dict | None = None
        self.row: Candidate | None = None


def pick(rng: random.Random, weighted):
    roll, total = rng.random(), 0.0
    for value, weight in weighted:
        total += weight
        if roll < total:
            return value
    return weighted[-1][0]


def review_pair(rng, cand: Planned, annotators, adjudicators, now) -> list[Planned]:
    """Give `cand` two reviews and the status they imply; returns the child it makes, if any."""
    excluded = {cand.author, cand.co_author}
    first, second = rng.sample([a for a in annotators if a not in excluded], 2)
    outcome = pick(rng, OUTCOMES)
    if outcome == "revised" and cand.round >= MAX_ROUND:
        outcome = "accepted"
    revision = f"{cand.text.rstrip('?')}, in a few words?"
    if outcome == "accepted":
        decisions, texts = ("accept", "accept"), ("", "")
    elif outcome == "discarded":
        decisions, texts = ("discard", "discard"), ("", "")
    elif outcome == "revised":
        decisions, texts = ("revise", "revise"), (revision, revision)
    else:
        decisions = rng.choice(DISPUTE_PAIRS)
        if rng.random() < 0.5:
            decisions = decisions[::-1]
        texts = tuple(
            f"{revision} (version {i})" if d == "revise" else "" for i, d in enumerate(decisions, 1)
        )
    t1 = cand.created_at + timedelta(minutes=rng.randint(5, 3 * 24 * 60))
    t2 = t1 + timedelta(minutes=rng.randint(1, 24 * 60))
    t1, t2 = min(t1, now), min(t2, now)
    for slot, (who, decision, text, at) in enumerate(
        zip((first, second), decisions, texts, (t1, t2), strict=True), start=1
    ):
        reasons = [] if decision == "accept" else rng.sample(REASON_KEYS, rng.randint(1, 2))
        cand.reviews.append(
            {
                "annotator": who,
                "slot": slot,
                "decision": decision,
                "revised_text": text,
                "reasons": reasons,
                "seconds": rng.randint(15, 400),
                "created_at": at,
            }
        )
    children = []
    if decisions == ("accept", "accept"):
        cand.status = CandidateStatus.ACCEPTED
    elif decisions == ("discard", "discard"):
        cand.status = CandidateStatus.DISCARDED
    elif decisions == ("revise", "revise") and normalize_text(texts[0]) == normalize_text(texts[1]):
        cand.status = CandidateStatus.REVISED
        children.append(
            Planned(
                cand.image,
                texts[0],
                cand.round + 1,
                cand,
                CandidateOrigin.REVISION,
                first,
                second,
                t2,
            )
        )
    else:
        cand.status = CandidateStatus.DISPUTED
    cand.resolved_at = t2 if cand.status != CandidateStatus.DISPUTED else None
    if cand.status == CandidateStatus.DISPUTED and rng.random() < ADJUDICATED_SHARE:
        eligible = [a for a in adjudicators if a not in excluded]
        adjudicator = rng.choice(eligible)
        choices = ["discard"] + (["accept"] if "accept" in decisions else [])
        if cand.round < MAX_ROUND:
            choices.append("revise")
        decision = rng.choice(choices)
        at = min(t2 + timedelta(minutes=rng.randint(10, 2 * 24 * 60)), now)
        chosen_slot, revised = None, ""
        if decision == "revise":
            revise_slots = [i for i, d in enumerate(decisions) if d == "revise"]
            if revise_slots and rng.random() < 0.7:
                chosen_slot = rng.choice(revise_slots)
                revised = texts[chosen_slot]
            else:
                revised = f"{revision} (adjudicated)"
        cand.adjudication = {
            "adjudicator": adjudicator,
            "decision": decision,
            "revised_text": revised,
            "chosen_slot": chosen_slot,
            "seconds": rng.randint(30, 600),
            "created_at": at,
        }
        cand.status = {
            "accept": CandidateStatus.ACCEPTED,
            "discard": CandidateStatus.DISCARDED,
            "revise": CandidateStatus.REVISED,
        }[decision]
        cand.resolved_at = at
        if decision == "revise":
            # As services.adjudication_resolve: the picked annotator, else the adjudicator.
            author = (
                cand.reviews[chosen_slot]["annotator"] if chosen_slot is not None else adjudicator
            )
            children.append(
                Planned(
                    cand.image,
                    revised,
                    cand.round + 1,
                    cand,
                    CandidateOrigin.ADJUDICATION,
                    author,
                    None,
                    at,
                )
            )
    return children


def make_plan(rng, args, images, annotators, adjudicators, now) -> list[Planned]:
    """Every candidate in insertion order: each one after its parent."""
    plan: list[Planned] = []
    start = now - timedelta(days=30)

    def fresh(image_index: int) -> Planned:
        image = images[image_index % len(images)]
        text = rng.choice(QUESTIONS).format(e=image.entity.lower())
        created = start + timedelta(minutes=rng.randint(0, 20 * 24 * 60))
        return Planned(image, text, 1, None, CandidateOrigin.LLM, None, None, created)

    children: list[Planned] = []
    reviewed = 0
    next_image = 0
    # Bounded: each pass either reviews a candidate or leaves a child open, and the children
    # are at most (reviewed) many, so this ends within 2 * args.reviewed + 1 passes.
    for _ in range(2 * args.reviewed + 1):
        if reviewed >= args.reviewed:
            break
        if children:
            cand = children.pop(0)
            plan.append(cand)
            if rng.random() >= CHILD_REVIEWED_SHARE:
                continue  # left open: part of the open pool
        else:
            cand = fresh(next_image)
            next_image += 1
            plan.append(cand)
        children.extend(review_pair(rng, cand, annotators, adjudicators, now))
        reviewed += 1
    plan.extend(children)  # children of the last ones reviewed stay open
    n_open = sum(1 for c in plan if c.status == CandidateStatus.OPEN)
    # Top the pool up with fresh LLM candidates on random images, the newest rows.
    for _ in range(max(0, args.open_pool - n_open)):
        plan.append(fresh(rng.randrange(len(images))))
    return plan


# --- writing ----------------------------------------------------------------------------------


def insert(rng, args, annotators, adjudicators) -> dict:
    now = timezone.now()
    photo = shared_photo()
    batch = ImportBatch.objects.create(
        source=ImportBatch.Source.COMMAND,
        file_name="bench/generate_review_data.py",
        imported=args.images,
        created_at=now - timedelta(days=31),
    )
    images = Image.objects.bulk_create(
        [
            Image(
                source_id=f"bench-{i:05d}",
                file=photo,
                entity=f"{rng.choice(ENTITIES)} {i}",
                domain=rng.choice(DOMAINS),
                popularity=pick(
                    rng, [(Popularity.HEAD, 0.3), (Popularity.TORSO, 0.4), (Popularity.TAIL, 0.3)]
                ),
                egocentric=rng.random() < 0.1,
                import_batch=batch,
                created_at=now - timedelta(days=31),
            )
            for i in range(1, args.images + 1)
        ],
        batch_size=2000,
    )
    plan = make_plan(rng, args, images, annotators, adjudicators, now) if images else []

    # Candidates level by level, so that each parent has its primary key before its children.
    for level in range(1, MAX_ROUND + 1):
        todo = [c for c in plan if c.round == level]
        rows = [
            Candidate(
                image=c.image,
                text=c.text,
                round=c.round,
                parent=c.parent.row if c.parent else None,
                origin=c.origin,
                author=c.author,
                co_author=c.co_author,
                status=c.status,
                created_at=c.created_at,
                resolved_at=c.resolved_at,
            )
            for c in todo
        ]
        for c, row in zip(todo, Candidate.objects.bulk_create(rows, batch_size=2000), strict=True):
            c.row = row

    review_rows, owners = [], []
    for c in plan:
        for r in c.reviews:
            review_rows.append(
                Review(
                    candidate=c.row,
                    annotator=r["annotator"],
                    slot=r["slot"],
                    candidate_author=c.author,
                    candidate_co_author=c.co_author,
                    decision=r["decision"],
                    revised_text=r["revised_text"],
                    reasons=r["reasons"],
                    comment="",
                    seconds=r["seconds"],
                    created_at=r["created_at"],
                )
            )
            owners.append(c)
    reviews = Review.objects.bulk_create(review_rows, batch_size=2000)
    by_candidate: dict[int, list[Review]] = {}
    for c, review in zip(owners, reviews, strict=True):
        by_candidate.setdefault(id(c), []).append(review)

    adjudications = []
    for c in plan:
        a = c.adjudication
        if a is None:
            continue
        chosen = by_candidate[id(c)][a["chosen_slot"]] if a["chosen_slot"] is not None else None
        adjudications.append(
            Adjudication(
                candidate=c.row,
                adjudicator=a["adjudicator"],
                decision=a["decision"],
                revised_text=a["revised_text"],
                chosen_review=chosen,
                comment="",
                seconds=a["seconds"],
                created_at=a["created_at"],
            )
        )
    Adjudication.objects.bulk_create(adjudications, batch_size=2000)

    events = []
    for c in plan:
        if c.parent is not None:
            events.append(
                AuditEvent(
                    actor=c.author,
                    action="candidate.create",
                    candidate=c.row,
                    image=c.image,
                    at=c.created_at,
                    data={"origin": c.origin, "parent": c.parent.row.pk, "round": c.round},
                )
            )
        if c.reviews:
            second = c.reviews[1]
            paired = {
                "accept": "two acceptances",
                "discard": "two discards",
                "revise": "two identical revisions",
            }
            first_status = CandidateStatus.DISPUTED if c.adjudication else c.status
            events.append(
                AuditEvent(
                    actor=second["annotator"],
                    action="candidate.status",
                    candidate=c.row,
                    image=c.image,
                    at=second["created_at"],
                    data={
                        "from": "open",
                        "to": first_status,
                        "reason": paired[c.reviews[0]["decision"]]
                        if first_status != "disputed"
                        else f"{c.reviews[0]['decision']} against {second['decision']}",
                    },
                )
            )
        if c.adjudication:
            a = c.adjudication
            events.append(
                AuditEvent(
                    actor=a["adjudicator"],
                    action="candidate.status",
                    candidate=c.row,
                    image=c.image,
                    at=a["created_at"],
                    data={
                        "from": "disputed",
                        "to": c.status,
                        "reason": f"adjudicated: {a['decision']}",
                    },
                )
            )
    AuditEvent.objects.bulk_create(events, batch_size=2000)

    counts: dict[str, int] = {}
    for c in plan:
        counts[c.status] = counts.get(c.status, 0) + 1
    return {
        "images": len(images),
        "candidates": len(plan),
        "reviews": len(reviews),
        "adjudications": len(adjudications),
        "audit_events": len(events),
        "by_status": dict(sorted(counts.items())),
        "open_with_author": sum(1 for c in plan if c.status == CandidateStatus.OPEN and c.author),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if Image.objects.exists() and not args.reset:
        print(
            f"The database ({connection.vendor}, {connection.settings_dict['NAME']}) has "
            f"{Image.objects.count()} images already; give --reset to empty the "
            "annotation tables first.",
            file=sys.stderr,
        )
        return 2
    if args.reset:
        reset()
    rng = random.Random(args.seed)
    with transaction.atomic():
        annotators, adjudicators = bench_users()
        summary = insert(rng, args, annotators, adjudicators)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for model in [*annotation_models(), AuthToken, User]:
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    write_tokens(args.tokens, annotators)
    summary["seconds"] = round(time.monotonic() - started, 1)
    summary["tokens"] = str(args.tokens)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
