"""One annotator of tests/test_race.py, run as its own OS process:

    python -m tests.race_worker USERNAME SEED DEADLINE_SECONDS GO_FILE

The environment names the database (DATABASE_URL, DJANGO_SETTINGS_MODULE). The process sets
Django up, prints {"event": "ready"}, waits for GO_FILE to exist (so that every annotator starts
at once), then loops until nothing is left for it to review or the deadline passes: claim and
review the claimed candidate, and now and then a hostile move (review a candidate it did not
claim, review one of its own reviews again). Each outcome is one JSON line on stdout; the last
line is {"event": "done", ...}. Only `services.ReviewError`s are caught: anything else (an
IntegrityError, a locked database) ends the process with a traceback and a non-zero exit code.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

# A small fixed set, so that two annotators often write the same revision (in different case
# and spacing, which must still count as identical).
REVISIONS = [
    "Which region of France does this dish come from?",
    "What wine is traditionally used to cook this dish?",
]
DECISIONS = ["accept"] * 40 + ["discard"] * 25 + ["revise"] * 35


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(username: str, seed: int, deadline_s: float, go_file: str) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User

    from annotation import candidates
    from annotation.models import Candidate, CandidateStatus
    from annotation.review import services
    from core.errors import Conflict, NotAllowed

    rng = random.Random(seed)
    user = User.objects.get(username=username)
    emit(event="ready", user=username, pid=os.getpid())

    wait_until = time.monotonic() + 30
    while not Path(go_file).exists():
        if time.monotonic() > wait_until:
            emit(event="done", reason="no-go", counts={})
            return 3
        time.sleep(0.005)
    deadline = time.monotonic() + deadline_s

    reviewed: list[int] = []  # candidates this annotator reviewed
    counts: dict[str, int] = {}

    def count(key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    def decide(candidate_text: str) -> tuple[str, str]:
        decision = rng.choice(DECISIONS)
        if decision != "revise":
            return decision, ""
        options = [
            t
            for t in REVISIONS
            if candidates.normalize_text(t) != candidates.normalize_text(candidate_text)
        ]
        text = rng.choice(options)
        text = rng.choice([text, text.upper(), "  " + text.replace(" ", "  ") + " "])
        return decision, text

    slowest: dict[str, float] = {}  # the longest call of each kind, in milliseconds
    total: dict[str, float] = {}  # milliseconds spent in each kind of call

    def timed(op: str, started: float) -> None:
        ms = (time.monotonic() - started) * 1000
        slowest[op] = round(max(slowest.get(op, 0.0), ms), 1)
        total[op] = round(total.get(op, 0.0) + ms, 1)

    def submit(how: str, candidate_id: int, decision: str, revised: str, author_ids) -> None:
        started = time.monotonic()
        try:
            review = services.review_submit(
                user=user,
                candidate_id=candidate_id,
                decision=decision,
                revised_text=revised,
                reasons=["leading"] if decision == "discard" else [],
                seconds=rng.randint(5, 90),
            )
        except services.ReviewError as exc:
            timed("submit", started)
            count(f"{how}:{type(exc).__name__}")
            emit(
                event="refused",
                how=how,
                candidate=candidate_id,
                error=type(exc).__name__,
                message=exc.message,
            )
            if how == "own" and not isinstance(exc, NotAllowed):
                emit(
                    event="violation",
                    what="own candidate refused with the wrong error",
                    candidate=candidate_id,
                    error=type(exc).__name__,
                )
            return
        timed("submit", started)
        count(f"{how}:created")
        reviewed.append(candidate_id)
        emit(
            event="created",
            how=how,
            review=review.pk,
            candidate=candidate_id,
            annotator=user.pk,
            decision=review.decision,
            revised_text=review.revised_text,
            slot=review.slot,
        )
        if user.pk in author_ids:
            emit(event="violation", what="reviewed a candidate it wrote", candidate=candidate_id)

    while True:
        if time.monotonic() > deadline:
            emit(event="done", reason="deadline", counts=counts, slowest_ms=slowest, total_ms=total)
            return 0
        roll = rng.random()

        if roll < 0.12 and reviewed:
            # Hostile: review again a candidate this annotator has reviewed. Always a Conflict.
            candidate_id = rng.choice(reviewed)
            try:
                review = services.review_submit(
                    user=user, candidate_id=candidate_id, decision=rng.choice(["accept", "discard"])
                )
            except Conflict:
                count("resubmit:Conflict")
                emit(event="refused", how="resubmit", candidate=candidate_id, error="Conflict")
            except services.ReviewError as exc:
                emit(
                    event="violation",
                    what="resubmit refused with the wrong error",
                    candidate=candidate_id,
                    error=type(exc).__name__,
                    message=exc.message,
                )
            else:
                emit(
                    event="violation",
                    what="resubmit accepted",
                    candidate=candidate_id,
                    review=review.pk,
                )
            continue

        if roll < 0.27:
            # Hostile: review an open candidate without claiming it (maybe one it wrote, maybe
            # one whose slots other people hold).
            open_ids = list(
                Candidate.objects.filter(status=CandidateStatus.OPEN)
                .exclude(claims__annotator=user)
                .values_list("pk", "text", "author_id", "co_author_id")
            )
            if open_ids:
                pk, text, author_id, co_author_id = rng.choice(open_ids)
                how = "own" if user.pk in (author_id, co_author_id) else "unclaimed"
                decision, revised = decide(text)
                submit(how, pk, decision, revised, (author_id, co_author_id))
                continue

        started = time.monotonic()
        claimed = services.review_claim(user=user)
        timed("claim", started)
        if claimed is None:
            count("claim:none")
            if not Candidate.objects.reviewable_by(user).exists():
                emit(
                    event="done",
                    reason="exhausted",
                    counts=counts,
                    slowest_ms=slowest,
                    total_ms=total,
                )
                return 0
            time.sleep(rng.uniform(0.002, 0.02))  # other people's leases: they'll submit soon
            continue
        candidate = claimed.candidate
        count("claim:got")
        if user.pk in (candidate.author_id, candidate.co_author_id):
            emit(event="violation", what="claimed a candidate it wrote", candidate=candidate.pk)
        if candidate.pk in reviewed:
            emit(event="violation", what="claimed a candidate it reviewed", candidate=candidate.pk)
        decision, revised = decide(candidate.text)
        submit(
            "claimed",
            candidate.pk,
            decision,
            revised,
            (candidate.author_id, candidate.co_author_id),
        )


if __name__ == "__main__":
    name, seed_arg, deadline_arg, go = sys.argv[1:5]
    sys.exit(main(name, int(seed_arg), float(deadline_arg), go))
