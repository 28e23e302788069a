"""Annotators racing for the same pool, each in its own OS process (tests/race_worker.py).

Eight processes claim and review 80 open candidates at once, with hostile moves mixed in
(reviews of unclaimed candidates, of their own candidates, second reviews of the same
candidate). Afterwards the database must hold a consistent state: at most two reviews per
candidate from two different people who did not write it, every status derived from its
pair of decisions, and every review a process was told it created present.

Runs on PostgreSQL (row locks, SKIP LOCKED) and on SQLite (WAL, IMMEDIATE transactions, a
busy timeout), whose test database is a file that other processes can open.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection

from annotation.candidates import normalize_text
from annotation.models import (
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Decision,
    Image,
    Review,
)
from tests.processes import child_database_url

pytestmark = [pytest.mark.race, pytest.mark.django_db(transaction=True)]

N_ANNOTATORS = 8
N_IMAGES = 10
PER_IMAGE = 8
DEADLINE_S = 30  # each process stops by then; the pool normally runs out in a few seconds
REPO = Path(settings.BASE_DIR)


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "PYTEST"))}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=child_database_url(),
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
    )
    return env


@pytest.fixture
def pool(transactional_db):
    """8 annotators and 80 open candidates, committed; 10 of them written by an annotator."""
    group = Group.objects.get_or_create(name="annotator")[0]
    people = []
    for i in range(N_ANNOTATORS):
        person = User.objects.create_user(f"racer{i}", password=None)  # no hashing: fast
        person.groups.add(group)
        people.append(person)
    candidates = []
    for i in range(N_IMAGES):
        image = Image.objects.create(
            source_id=f"race-{i}",
            file=f"images/race-{i}.png",
            entity="Beef bourguignon",
            domain="food",
            popularity="head",
        )
        for j in range(PER_IMAGE):
            written = j == 0  # one candidate per image has two human authors
            candidates.append(
                Candidate.objects.create(
                    image=image,
                    text=f"Question {j} about image {i}: how is this dish made?",
                    origin=CandidateOrigin.REVISION if written else CandidateOrigin.IMPORT,
                    author=people[i % N_ANNOTATORS] if written else None,
                    co_author=people[(i + 3) % N_ANNOTATORS] if written else None,
                )
            )
    return people, candidates


def _run_workers(people, tmp_path: Path) -> list[tuple[str, int, list[dict], str]]:
    go = tmp_path / "go"
    env = child_env()
    procs = []
    for i, person in enumerate(people):
        out = open(tmp_path / f"{person.username}.out", "w+")  # noqa: SIM115 (closed below)
        err = open(tmp_path / f"{person.username}.err", "w+")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.race_worker",
                person.username,
                str(1000 + i),
                str(DEADLINE_S),
                str(go),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=err,
        )
        procs.append((person.username, proc, out, err))
    try:
        # Start together: wait for every process to be set up, then open the gate.
        ready_by = time.monotonic() + 60
        while time.monotonic() < ready_by:
            ready = sum('"ready"' in (tmp_path / f"{u}.out").read_text() for u, *_ in procs)
            exited = [u for u, p, *_ in procs if p.poll() is not None]
            if ready == len(procs) or exited:
                break
            time.sleep(0.02)
        go.touch()
        for _, proc, *_ in procs:
            proc.wait(timeout=DEADLINE_S + 60)
    finally:
        for _, proc, *_ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = []
    for username, proc, out, err in procs:
        out.seek(0)
        err.seek(0)
        lines = [json.loads(line) for line in out.read().splitlines() if line.strip()]
        results.append((username, proc.returncode, lines, err.read()))
        out.close()
        err.close()
    return results


def _expected_status(first: Review, second: Review) -> str:
    decisions = {first.decision, second.decision}
    if decisions == {Decision.ACCEPT}:
        return CandidateStatus.ACCEPTED
    if decisions == {Decision.DISCARD}:
        return CandidateStatus.DISCARDED
    if decisions == {Decision.REVISE} and (
        normalize_text(first.revised_text) == normalize_text(second.revised_text)
    ):
        return CandidateStatus.REVISED
    return CandidateStatus.DISPUTED


def test_annotators_racing_for_one_pool(pool, tmp_path):
    people, originals = pool
    started = time.monotonic()
    results = _run_workers(people, tmp_path)
    elapsed = time.monotonic() - started

    # Nothing crashed, and no process saw a rule broken.
    for username, rc, lines, stderr in results:
        assert rc == 0, f"{username} exited with {rc}:\n{stderr[-4000:]}"
        assert lines and lines[-1]["event"] == "done", f"{username}: no done line\n{stderr}"
        violations = [e for e in lines if e["event"] == "violation"]
        assert not violations, f"{username}: {violations}"
    reasons = {username: lines[-1]["reason"] for username, _, lines, _ in results}
    assert set(reasons.values()) == {"exhausted"}, f"ran out of time after {elapsed:.1f}s"

    events = [e for _, _, lines, _ in results for e in lines]
    created = {e["review"]: e for e in events if e["event"] == "created"}
    refused = [e for e in events if e["event"] == "refused"]
    # The hostile moves happened, and were refused as they should be.
    assert any(e["how"] == "resubmit" for e in refused)
    assert all(e["error"] == "Conflict" for e in refused if e["how"] == "resubmit")
    assert all(e["error"] == "NotAllowed" for e in refused if e["how"] == "own")

    # No submitted review lost, none unreported: the database holds exactly what was reported.
    reviews = {r.pk: r for r in Review.objects.all()}
    assert set(reviews) == set(created), "reviews reported as created differ from the database"
    for pk, event in created.items():
        review = reviews[pk]
        assert (
            review.candidate_id,
            review.annotator_id,
            review.decision,
            review.revised_text,
            review.slot,
        ) == (
            event["candidate"],
            event["annotator"],
            event["decision"],
            event["revised_text"],
            event["slot"],
        )

    by_candidate: dict[int, list[Review]] = {}
    for review in sorted(reviews.values(), key=lambda r: (r.candidate_id, r.slot)):
        by_candidate.setdefault(review.candidate_id, []).append(review)
    status_events: dict[int, int] = {}
    for candidate_id in AuditEvent.objects.filter(action="candidate.status").values_list(
        "candidate_id", flat=True
    ):
        status_events[candidate_id] = status_events.get(candidate_id, 0) + 1

    tally: dict[str, int] = {}
    for candidate in Candidate.objects.all():
        pair = by_candidate.get(candidate.pk, [])
        where = f"candidate {candidate.pk} ({candidate.status}): {pair}"
        assert len(pair) <= 2, where
        assert [r.slot for r in pair] == list(range(1, len(pair) + 1)), where
        annotators = [r.annotator_id for r in pair]
        assert len(set(annotators)) == len(annotators), where
        authors = {candidate.author_id, candidate.co_author_id} - {None}
        assert not authors & set(annotators), f"reviewed by its author: {where}"
        children = list(candidate.children.all())
        if len(pair) < 2:
            assert candidate.status == CandidateStatus.OPEN, where
            assert not children and candidate.pk not in status_events, where
            tally["open"] = tally.get("open", 0) + 1
            continue
        first, second = pair
        expected = _expected_status(first, second)
        assert candidate.status == expected, where
        assert status_events.get(candidate.pk) == 1, where
        if expected == CandidateStatus.REVISED:
            assert len(children) == 1, where
            child = children[0]
            assert (child.text, child.origin, child.round, child.author_id, child.co_author_id) == (
                first.revised_text,
                CandidateOrigin.REVISION,
                candidate.round + 1,
                first.annotator_id,
                second.annotator_id,
            ), where
            assert candidate.resolved_at is not None
        else:
            assert not children, where
        tally[str(expected)] = tally.get(str(expected), 0) + 1

    # The whole first round was reviewed twice (later rounds may stay open: the last revisers
    # can't review their own child).
    for candidate in originals:
        assert len(by_candidate.get(candidate.pk, [])) == 2, f"candidate {candidate.pk} unfinished"

    counts: dict[str, int] = {}
    for _, _, lines, _ in results:
        for key, n in lines[-1]["counts"].items():
            counts[key] = counts.get(key, 0) + n
    for username, _, lines, _ in results:
        print(username, lines[-1].get("slowest_ms"), lines[-1].get("total_ms"))
    print(
        f"\n{connection.vendor}: {elapsed:.1f}s, {len(reviews)} reviews, statuses {tally}, "
        f"outcomes {dict(sorted(counts.items()))}"
    )
