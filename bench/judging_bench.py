"""Judging through the job system against the fake Gemini server (issue 5, benchmarks 2 and 3).

(2) Throughput: a judge job over R responses x K checks (default 2 models x 100 questions x
35 checks = 7,000 calls), run in-process by the job system's chunk runner exactly as a worker
runs it (the judging.judge kind, its chunk size and concurrency), with the real google-genai
client talking to tests/fake_llm.py in a process of its own, answering each call after --delay
seconds. Prints calls per second against the ideal (calls in flight / delay) and CPU per call.

(3) Incremental re-judging: then, for each k in --edit (default 1, 10, 25 percent), a new
frozen rubric version of every question is made with k% of all checks reworded (the others
copied unchanged), and the judge job runs again. Prints the calls that re-run made as a share of
the full run: the target is k%. Calls are counted from the ledger (a row per HTTP request that
reached the server), not from the job's own summary.

The database is a throwaway SQLite file, migrated first. Loopback only; every loop is bounded.

    .venv/bin/python bench/judging_bench.py
    .venv/bin/python bench/judging_bench.py --questions 300 --models 3 --delay 0.2 --edit 5 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.llm_throughput import _Discard as Discard  # noqa: E402 (after the path)
from bench.llm_throughput import cpu  # noqa: E402

TIERS = ["answer_critical"] * 10 + ["valuable"] * 15 + ["context"] * 10
EDIT_STAGES = ["human_1", "llm_refined_2", "human_2"]  # one new version per edit round


def serve_fake(delay: float) -> None:
    """Child process: the fake server answering every call with a verdict after `delay`."""
    from http.server import ThreadingHTTPServer

    from tests.fake_llm import Reply, start_fake_llm

    ThreadingHTTPServer.request_queue_size = 1024
    fake, server = start_fake_llm()
    verdicts = ["meets", "meets", "partially_meets", "missing", "contradicts"]

    def respond(recorded: Any) -> Reply:
        verdict = verdicts[len(json.dumps(recorded.body)) % len(verdicts)]
        return Reply(text=json.dumps({"verdict": verdict, "rationale": "bench"}), delay=delay)

    fake.responder = respond
    fake.requests = Discard()
    print(fake.base_url, flush=True)
    sys.stdin.read()
    server.shutdown()


def make_data(questions: int, models: int, seed: int) -> None:
    """Questions with a frozen imported rubric of 35 checks, and text-only responses."""
    from django.utils import timezone

    from annotation.models import Candidate, CandidateStatus, FinalQuestion, Image
    from judging.models import EvaluatedModel, Judge, Response
    from llm.models import LLMModel
    from rubrics.models import Rubric, RubricCheck, RubricVersion

    rng = random.Random(seed)
    images = Image.objects.bulk_create(
        [
            Image(
                source_id=f"bench-{n:05d}",
                file=f"images/bench-{n:05d}.jpg",
                entity=f"Entity {n}",
                domain=rng.choice(["food", "plants", "landmarks"]),
                popularity=rng.choice(["head", "torso", "tail"]),
            )
            for n in range(questions)
        ]
    )
    candidates = Candidate.objects.bulk_create(
        [
            Candidate(
                image=i,
                text=f"What is the story of this, number {i.pk}?",
                origin="import",
                status=CandidateStatus.ACCEPTED,
            )
            for i in images
        ]
    )
    finals = FinalQuestion.objects.bulk_create(
        [
            FinalQuestion(image=c.image, candidate=c, text=c.text, method="manual")
            for c in candidates
        ]
    )
    rubrics = Rubric.objects.bulk_create([Rubric(question=q) for q in finals])
    now = timezone.now()
    versions = RubricVersion.objects.bulk_create(
        [RubricVersion(rubric=r, stage="imported", meta_rubric={}, frozen_at=now) for r in rubrics]
    )
    RubricCheck.objects.bulk_create(
        [
            RubricCheck(
                version=v,
                position=p,
                check_id=f"C{p}",
                kind="fact",
                tier=tier,
                text=f"Check {p} of question {v.rubric.question_id}: a fact to state.",
            )
            for v in versions
            for p, tier in enumerate(TIERS)
        ],
        batch_size=2000,
    )
    llm = LLMModel.objects.create(
        name="bench-judge", provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    Judge.objects.create(name="bench-judge", llm_model=llm)
    for m in range(models):
        evaluated = EvaluatedModel.objects.create(name=f"model-{m}")
        Response.objects.bulk_create(
            [
                Response(
                    model=evaluated,
                    question=q,
                    setting="text_only",
                    text=f"Model {m} answers question {q.pk}. " + "Words. " * 200,
                )
                for q in finals
            ]
        )


def edit_round(stage: str, percent: float, seed: int) -> int:
    """A new frozen version of every rubric: `percent` of all checks reworded. Returns how
    many checks were edited."""
    from django.utils import timezone

    from rubrics.models import RubricCheck, RubricVersion
    from rubrics.services import final_versions_of

    rng = random.Random(seed)
    now = timezone.now()
    current = final_versions_of(
        list(RubricVersion.objects.values_list("rubric__question_id", flat=True).distinct())
    )
    old = list(
        RubricCheck.objects.filter(version_id__in=current.values()).order_by(
            "version_id", "position"
        )
    )
    chosen = set(rng.sample(range(len(old)), round(len(old) * percent / 100)))
    parents = RubricVersion.objects.in_bulk(list(current.values()))
    made = {}
    for version_id, parent in parents.items():
        made[version_id] = RubricVersion.objects.create(
            rubric_id=parent.rubric_id, stage=stage, parent=parent, meta_rubric={}, frozen_at=now
        )
    RubricCheck.objects.bulk_create(
        [
            RubricCheck(
                version=made[c.version_id],
                position=c.position,
                check_id=c.check_id,
                kind=c.kind,
                tier=c.tier,
                text=(c.text + f" (edited in {stage})") if n in chosen else c.text,
            )
            for n, c in enumerate(old)
        ],
        batch_size=2000,
    )
    return len(chosen)


def run_judge(conf: Any) -> tuple[int, float, float, Any]:
    """Launch the judge over everything and drain it in-process: (calls, wall, cpu, job)."""
    from judging.models import Judge
    from judging.runs.llm_jobs import judge_launch
    from llm import jobs
    from llm.gateway import Gateway
    from llm.models import Job, LedgerEntry
    from llm.ratelimit import MemoryTokenBucket

    job = judge_launch(user=None, judge=Judge.objects.get())
    before_cpu, started = cpu(), time.perf_counter()
    for _ in range(job.items_total + 10):  # bounded: a chunk takes at least one item
        if not jobs.job_run_chunk(
            job_id=job.pk, gateway_factory=lambda: Gateway(limiter=MemoryTokenBucket(), conf=conf)
        ):
            break
    wall, spent = time.perf_counter() - started, cpu() - before_cpu
    calls = LedgerEntry.objects.filter(job_id=job.pk, outcome="ok").count()
    return calls, wall, spent, Job.objects.get(pk=job.pk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument(
        "--edit",
        type=float,
        nargs="*",
        default=[1, 10, 25],
        help="percentages of checks to reword, one re-run each (at most 3)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.delay)
        return
    if len(args.edit) > len(EDIT_STAGES):
        parser.error(f"--edit takes at most {len(EDIT_STAGES)} percentages")

    workdir = Path(tempfile.mkdtemp(prefix="gamut-judging-bench-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
        GAMUT_VAR_DIR=str(workdir),
        LOG_LEVEL="WARNING",
    )
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from judging.runs.llm_jobs import CALLS_PER_RESPONSE, JUDGE
    from llm.gateway import GatewaySettings
    from llm.jobs import get_kind
    from llm.tasks import run_job_chunk
    from tests.fake_llm import GEMINI_KEY

    call_command("migrate", verbosity=0)
    run_job_chunk.delay_on_commit = lambda job_id: None  # this process runs the chunks
    make_data(args.questions, args.models, args.seed)
    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake", "--delay", str(args.delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    results: dict[str, Any] = {
        "questions": args.questions,
        "models": args.models,
        "checks": len(TIERS),
        "delay_s": args.delay,
        "rounds": [],
    }
    try:
        assert fake.stdout is not None
        base_url = fake.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the fake server did not start: {base_url!r}")
        conf = GatewaySettings(
            gemini_api_key=GEMINI_KEY,
            gemini_base_url=base_url,
            timeout_s=60,
            max_attempts=3,
            backoff_base_s=0.05,
            backoff_cap_s=0.2,
        )
        kind = get_kind(JUDGE)
        in_flight = kind.concurrency * CALLS_PER_RESPONSE
        ideal = in_flight / args.delay
        expected = args.questions * args.models * len(TIERS)
        print(
            f"judge job: {args.models} models x {args.questions} questions x {len(TIERS)} "
            f"checks = {expected} calls; fake answers in {args.delay * 1000:.0f} ms; "
            f"{kind.concurrency} responses x {CALLS_PER_RESPONSE} calls in flight; ideal "
            f"{ideal:.0f} calls/s; {os.cpu_count()} CPUs",
            flush=True,
        )
        calls, wall, spent, job = run_judge(conf)
        full = {
            "calls": calls,
            "wall_s": round(wall, 2),
            "calls_per_s": round(calls / wall, 1),
            "percent_of_ideal": round(100 * calls / wall / ideal, 1),
            "cpu_ms_per_call": round(1000 * spent / max(calls, 1), 2),
            "items_failed": job.items_failed,
        }
        results["full"] = full
        print(
            f"full run     {calls:>7} calls  {wall:7.2f} s  {calls / wall:7.1f} calls/s  "
            f"{full['percent_of_ideal']:5.1f}% of ideal  CPU {full['cpu_ms_per_call']:.2f} "
            f"ms/call  failed items {job.items_failed}",
            flush=True,
        )
        if calls != expected:
            print(f"WARNING: expected {expected} calls, the ledger has {calls}", flush=True)
        for stage, percent in zip(EDIT_STAGES, args.edit, strict=False):
            edited = edit_round(stage, percent, args.seed + len(results["rounds"]))
            again, wall, _, job = run_judge(conf)
            share = 100 * again / max(calls, 1)
            results["rounds"].append(
                {
                    "edit_percent": percent,
                    "checks_edited": edited,
                    "calls": again,
                    "share_percent": round(share, 2),
                    "expected_calls": edited * args.models,
                }
            )
            print(
                f"edit {percent:>5.1f}%  {edited:>6} checks edited  re-run {again:>6} calls  "
                f"= {share:5.2f}% of the full run (target {percent}%; "
                f"{edited * args.models} expected)",
                flush=True,
            )
    finally:
        if fake.stdin:
            fake.stdin.close()
        try:
            fake.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fake.kill()
            fake.wait()
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"judging-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1))
    print(f"figures written to {path.relative_to(REPO)}", flush=True)


if __name__ == "__main__":
    main()
