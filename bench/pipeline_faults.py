"""Every LLM stage through the job system against the fake Gemini server, with faults of every
kind the fake has (issue 10, "Done when"). Run by hand, not by CI.

On a small generated set (default 30 images) it runs, in order: generation (A.1), two
annotators accepting each image's first candidate, the guard (A.2), rubric construction (A.3),
refinement round 1 with its audit (A.4), a human round (each rubric's first check edited and a
check added), refinement round 2, answer collection and judging. Each stage is estimated and
launched through the same services as the console and `launch_job`; its chunks run in this
process (the real chunk runner, gateway and google-genai client, talking to tests/fake_llm.py
on loopback). The fake answers each call as the demo
provider would (llm/demo_provider.py: answers that keep the method's rules), and --rate of the
requests get each fault of tests/fake_llm.py's FAULTS (default 10% each: 429, 500/503,
timeout, malformed JSON, schema-invalid JSON, connection reset, rule-breaking valid JSON,
ids the prompt never gave, a human change lost or reverted by the rebuild). With
--schema-only the fake answers from each call's response schema alone instead (never an id
read out of the prompt), with no faults unless --modes names some.

Per stage it prints: items, done, failed (reasons counted), calls made (the ledger's rows,
every request and retry) against the requests the fake saw and against the estimate given
before the launch, repairs, retries, the faults injected, and the wall time. Then the stage's
failed items are retried once with fresh calls (job_retry_failed) and the same is printed.
It ends by checking that nothing was lost: every item done or failed with a reason, every job
over, every request the fake saw in the ledger, and every job's page and API answer not a 5xx.
Exit status 0 when that holds, 1 otherwise.

    .venv/bin/python bench/pipeline_faults.py                  # 30 images, 10% of each fault
    .venv/bin/python bench/pipeline_faults.py --images 100 --rate 0.05 --seed 3
    .venv/bin/python bench/pipeline_faults.py --modes rule_breaking ignores_ids --rate 0.3
    .venv/bin/python bench/pipeline_faults.py --schema-only      # issue 21: ids from the schema
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
MODEL = "gemini-faults"
DOMAINS = ("food", "places", "animals", "objects", "plants")
CLIENT_TIMEOUT_S = 2.0  # the gateway's timeout; a "timeout" fault answers after 2.5 s


# ---------------------------------------------------------------------------------------------
# The run.


@dataclass
class Figures:
    stage: str
    items: int
    done: int
    failed: int
    reasons: Counter[str]
    calls: int
    fake_requests: int
    repairs: int
    retries: int
    faults: Counter[str]
    estimate: str
    wall_s: float


def _reason(error: str) -> str:
    line = (error or "(no reason)").splitlines()[0]
    line = re.sub(r"\d+", "N", line)  # ids and counts vary; the kind of reason is what counts
    return line[:110]


class Run:
    def __init__(self, fake: Any, conf: Any) -> None:
        self.fake = fake
        self.conf = conf
        self.jobs: list[Any] = []
        self.problems: list[str] = []

    def gateway(self) -> Any:
        from llm.gateway import Gateway
        from llm.ratelimit import MemoryTokenBucket

        return Gateway(limiter=MemoryTokenBucket(), conf=self.conf)

    def drain(self, job: Any) -> None:
        """Run the job's chunks here until none is left to claim (bounded)."""
        from llm import jobs

        for _ in range(10_000):
            if not jobs.job_run_chunk(job_id=job.pk, gateway_factory=self.gateway):
                break
        job.refresh_from_db()

    def figures(
        self, stage: str, job: Any, since_pk: int, seen: int, estimate: str, wall: float
    ) -> Figures:
        from llm.models import ItemStatus, LedgerEntry

        rows = LedgerEntry.objects.filter(job_id=job.pk, pk__gt=since_pk)
        requests = self.fake.requests[seen:]
        failed = job.items.filter(status=ItemStatus.FAILED)
        return Figures(
            stage=stage,
            items=job.items_total,
            done=job.items_done,
            failed=job.items_failed,
            reasons=Counter(_reason(e) for e in failed.values_list("last_error", flat=True)),
            calls=rows.count(),
            fake_requests=len(requests),
            repairs=rows.filter(is_repair=True).count(),
            retries=rows.filter(attempt__gt=1).count(),
            faults=Counter(r.fault for r in requests if r.fault),
            estimate=estimate,
            wall_s=wall,
        )

    def stage(self, name: str, estimate: str, launch: Any) -> Any:
        """Launch, drain, print; then retry the failed items once with fresh calls."""
        from llm import jobs
        from llm.models import LedgerEntry

        last = LedgerEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        seen = len(self.fake.requests)
        started = time.perf_counter()
        job = launch()
        self.drain(job)
        self.jobs.append(job)
        first = self.figures(name, job, last, seen, estimate, time.perf_counter() - started)
        show(first)
        if job.items_failed:
            last = LedgerEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
            seen = len(self.fake.requests)
            started = time.perf_counter()
            retried = jobs.job_retry_failed(job_id=job.pk)
            self.drain(job)
            again = self.figures(
                f"{name} retry",
                job,
                last,
                seen,
                f"{retried} item(s) retried",
                time.perf_counter() - started,
            )
            show(again)
        self.check(name, job)
        return job

    def check(self, name: str, job: Any) -> None:
        """Nothing lost: the job is over, each item done or failed with a reason."""
        from llm.models import ItemStatus, JobStatus, LedgerEntry, Outcome

        job.refresh_from_db()
        statuses = Counter(job.items.values_list("status", flat=True))
        if job.status != JobStatus.DONE:
            self.problems.append(f"{name}: job {job.pk} is {job.status}, not done")
        if set(statuses) - {ItemStatus.DONE, ItemStatus.FAILED}:
            self.problems.append(f"{name}: items neither done nor failed: {dict(statuses)}")
        if statuses[ItemStatus.DONE] != job.items_done or statuses[ItemStatus.FAILED] != (
            job.items_failed
        ):
            self.problems.append(f"{name}: the job's counters disagree with its items")
        if job.items.filter(status=ItemStatus.FAILED, last_error="").exists():
            self.problems.append(f"{name}: an item failed without a reason")
        # Every request the fake saw is in the ledger, and every answer the ledger kept was
        # one the fake gave. The ledger may hold more rows than the fake saw requests: an
        # attempt that timed out before the fake read it (a loaded machine) is recorded too.
        requests = self.fake.requests
        rows = LedgerEntry.objects.all()
        answered = rows.filter(outcome__in=(Outcome.OK, Outcome.INVALID_OUTPUT)).count()
        answers = sum(1 for r in requests if r.fault not in _NO_ANSWER)
        if rows.count() < len(requests) or answered > answers:
            self.problems.append(
                f"{name}: the fake saw {len(requests)} requests and answered {answers} so far; "
                f"the ledger has {rows.count()} rows, {answered} of them answers"
            )


# The faults after which the fake sends no answer the gateway could keep.
_NO_ANSWER = ("rate_limited", "server_error", "timeout", "connection_reset")


def show(f: Figures) -> None:
    faults = ", ".join(f"{k} {v}" for k, v in sorted(f.faults.items())) or "none"
    print(
        f"{f.stage:<16} items {f.items:>4}  done {f.done:>4}  failed {f.failed:>3}  "
        f"calls {f.calls:>5} (the fake saw {f.fake_requests})  repairs {f.repairs:>4}  "
        f"retries {f.retries:>4}  estimate {f.estimate}  wall {f.wall_s:6.1f} s",
        flush=True,
    )
    print(f"{'':<16} faults injected: {faults}", flush=True)
    for reason, count in f.reasons.most_common():
        print(f"{'':<16} failed x{count}: {reason}", flush=True)


def make_images(workdir: Path, count: int) -> list[str]:
    from PIL import Image as PILImage

    from annotation.images.importing import ManifestEntry, images_import

    folder = workdir / "upload"
    folder.mkdir()
    entries = []
    for n in range(count):
        path = folder / f"photo-{n:03d}.png"
        PILImage.new("RGB", (32, 24), (n * 7 % 256, n * 13 % 256, 100 + n % 100)).save(path)
        entries.append(
            ManifestEntry(
                line=n + 1,
                source_id=f"fault-{n:03d}",
                image_path=path,
                entity=f"Fault-run entity {n}",
                domain=DOMAINS[n % len(DOMAINS)],
                popularity="head" if n % 2 else "tail",
            )
        )
    result = images_import(entries, actor=None, source="upload", file_name="pipeline_faults")
    return result.imported


def people() -> dict[str, Any]:
    from django.contrib.auth.models import Group, User

    from core.access import ROLE_GROUPS

    for name in ROLE_GROUPS:
        Group.objects.get_or_create(name=name)
    made = {"root": User.objects.create_superuser("root", "", "x")}
    for username, group in (
        ("ann1", "annotator"),
        ("ann2", "annotator"),
        ("rev", "rubric_reviser"),
    ):
        made[username] = User.objects.create_user(username, "", "x")
        made[username].groups.add(Group.objects.get(name=group))
    return made


def accept_first_candidates(users: dict[str, Any]) -> int:
    """Two annotators accept each image's first open LLM candidate (through the services)."""
    from annotation.models import Candidate, CandidateOrigin, CandidateStatus
    from annotation.review import services

    accepted = 0
    seen: set[int] = set()
    for candidate in Candidate.objects.filter(
        origin=CandidateOrigin.LLM, status=CandidateStatus.OPEN
    ).order_by("image_id", "pk"):
        if candidate.image_id in seen:
            continue
        seen.add(candidate.image_id)
        for annotator in (users["ann1"], users["ann2"]):
            services.review_submit(user=annotator, candidate_id=candidate.pk, decision="accept")
        accepted += 1
    return accepted


def human_round(reviser: Any) -> int:
    """Every rubric waiting for round 1 revised: its first check's text edited and a check
    added (two changes that refinement round 2 must carry or drop with a reason), completed."""
    from rubrics import services

    done = 0
    while (version := services.revision_claim(user=reviser)) is not None and done < 10_000:
        first = version.checks.order_by("position").first()
        for action, fields in (
            (services.check_edit_text, {"check_pk": first.pk, "text": "Edited by the bench."}),
            (services.check_add, {"text": "Added by the bench.", "tier": "valuable"}),
            (services.revision_complete, {}),
        ):
            version.refresh_from_db()
            action(user=reviser, version_id=version.pk, revision=version.revision, **fields)
        done += 1
    return done


def human_changes_kept() -> str:
    from collections import Counter as Tally

    from rubrics.models import RubricVersion, Stage

    outcomes = Tally(
        change["outcome"]
        for version in RubricVersion.objects.filter(stage=Stage.LLM_REFINED_2)
        for change in version.human_changes or []
    )
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())) or "none"


def construction(run: Run, key: str, user: Any) -> Any:
    from llm import launchers

    launcher = launchers.get_launcher(key)
    assert launcher is not None
    scope = launchers.Scope(ids=None, chosen=[], unknown=[])
    est, _, _ = launchers.scope_estimate(launcher, scope)
    return run.stage(
        launcher.label,
        f"{est.calls_min}-{est.calls_max}",
        lambda: launcher.launch(user=user, ids=None, fresh=False),
    )


def judging(run: Run, what: str, data: dict[str, Any], user: Any) -> Any:
    from judging.runs.services import run_estimate, run_launch

    data = {"ids": None, "fresh": False, **data}
    est = run_estimate(what, data)
    return run.stage(what, f"<={est.calls}", lambda: run_launch(user=user, what=what, data=data))


def pages_answer(run: Run, admin: Any) -> None:
    """Every job's console page and API answer, none with a 5xx."""
    from django.test import Client

    client = Client()
    client.force_login(admin)
    for job in run.jobs:
        for url in (f"/jobs/{job.pk}/", f"/api/jobs/{job.pk}/"):
            status = client.get(url).status_code
            if status >= 500:
                run.problems.append(f"GET {url} answered {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=30)
    parser.add_argument("--rate", type=float, default=0.1, help="share of requests per fault")
    parser.add_argument("--modes", nargs="+", default=None, help="fault kinds (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="which requests get the faults")
    parser.add_argument(
        "--schema-only",
        action="store_true",
        help="the fake answers from the response schema alone (tests/fake_llm.py, "
        "schema_only_reply), not as the demo provider; no faults unless --modes names some",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="gamut-pipeline-faults-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'faults.sqlite3'}",
        GAMUT_VAR_DIR=str(workdir),
        MEDIA_ROOT=str(workdir / "media"),
        LOG_LEVEL="ERROR",
        LLM_AUTO_GENERATE="False",
    )
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from judging.models import EvaluatedModel, Judge
    from llm.gateway import GatewaySettings
    from llm.models import LLMModel
    from llm.tasks import run_job_chunk
    from tests.fake_llm import FAULTS, GEMINI_KEY, demo_reply, schema_only_reply, start_fake_llm

    modes = args.modes if args.modes is not None else ([] if args.schema_only else list(FAULTS))
    unknown = [m for m in modes if m not in FAULTS]
    if unknown or args.rate * len(modes) > 1:
        raise SystemExit(f"modes among {FAULTS}, rates adding up to at most 1")
    call_command("migrate", verbosity=0)
    run_job_chunk.delay_on_commit = lambda job_id: None  # this process runs the chunks
    fake, server = start_fake_llm()
    # Schema-only: what a model decides on content, which no schema says (never an id): the
    # guard's candidates are specific, a human change it did not read is dropped with a reason.
    schema_only = schema_only_reply({"boilerplate": False, "outcome": "dropped"})
    fake.responder = schema_only if args.schema_only else demo_reply
    # A client that gave up (a timeout) resets its connection: no traceback for each.
    server.handle_error = lambda request, address: None
    for mode in modes:
        fake.inject(mode, args.rate, seed=args.seed, delay=CLIENT_TIMEOUT_S + 0.5)
    for setting in ("LLM_MODEL_GENERATION", "LLM_MODEL_GUARD", "LLM_MODEL_RUBRICS"):
        setattr(settings, setting, MODEL)
    settings.GEMINI_API_KEY, settings.GEMINI_BASE_URL = GEMINI_KEY, fake.base_url
    settings.LLM_MAX_ATTEMPTS, settings.LLM_BACKOFF_BASE_MS = 3, 20
    settings.LLM_BACKOFF_CAP_SECONDS, settings.LLM_RETRY_DELAY_CAP_SECONDS = 1, 1
    conf = replace(GatewaySettings.from_django(), timeout_s=CLIENT_TIMEOUT_S)
    llm = LLMModel.objects.create(
        name=MODEL, provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    evaluated = EvaluatedModel.objects.create(name="faults-answerer", llm_model=llm)
    judge = Judge.objects.create(name="faults-judge", llm_model=llm)
    users = people()
    images = make_images(workdir, args.images)
    print(
        f"{len(images)} images; faults: {', '.join(modes)} at {100 * args.rate:g}% each "
        f"({100 * args.rate * len(modes):g}% of requests); repairs <= {conf.max_repairs}, "
        f"attempts <= {conf.max_attempts}, 429 waits <= {conf.max_rate_limit_waits}, "
        f"job attempts <= {settings.LLM_JOB_MAX_ATTEMPTS}; database {workdir}",
        flush=True,
    )
    run = Run(fake, conf)
    root = users["root"]
    started = time.perf_counter()
    try:
        construction(run, "generate", root)
        print(f"{'':<16} reviews: {accept_first_candidates(users)} candidates accepted")
        construction(run, "guard", root)
        construction(run, "build", root)
        construction(run, "refine1", root)
        print(f"{'':<16} human round 1: {human_round(users['rev'])} rubrics completed")
        construction(run, "refine2", root)
        print(f"{'':<16} human changes in refinement 2: {human_changes_kept()}", flush=True)
        judging(run, "collect", {"model": evaluated, "setting": "multimodal"}, root)
        judging(run, "judge", {"judge": judge, "models": [], "settings": [], "batch": False}, root)
        pages_answer(run, root)
    finally:
        server.shutdown()
        server.server_close()
    print(
        f"total: {len(fake.requests)} requests, {sum(fake.injected.values())} faulted, "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    if run.problems:
        print("LOST OR WRONG:\n  " + "\n  ".join(run.problems), flush=True)
        raise SystemExit(1)
    print("nothing lost: every item done or failed with a reason, every request in the ledger")


if __name__ == "__main__":
    main()
