"""The benchmark export at full size, as the Export page makes it: how long the request that
starts it takes, how long the background job takes to write the zip, and how long the answers
that poll it and list the exports take.

    DATABASE_URL=postgres://postgres@127.0.0.1:5448/gamut_rubrics \\
    MEDIA_ROOT=bench/out/media .venv/bin/python bench/export_bench.py [--layout huggingface]
    ... bench/export_bench.py --layout site [--release NAME]   (a database with a release)

Run it on a database of bench/build_full_size.sh (gamut_rubrics: 1,813 questions with their
imported rubrics; the generators give every image the same small photo, so the zip's size is
the records', not real photos').
The job runs in this process through `jobs.job_run_chunk`, the function a worker's task calls;
the requests go through Django's test client (the whole view, no network). It prints one line
per measure; the export it made is left on the Export page.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=["gamut", "huggingface", "site"], default="gamut")
    parser.add_argument("--release", default="", help="a release's name (site: the latest)")
    parser.add_argument("--polls", type=int, default=20, help="GETs of the list to time")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from llm import jobs
    from llm.gateway import Gateway, GatewaySettings
    from llm.models import Job
    from llm.ratelimit import MemoryTokenBucket

    # The chunk task is run here, not sent to a broker.
    from llm.tasks import run_job_chunk
    from rubrics import export_jobs
    from rubrics.exporting import collect

    run_job_chunk.delay_on_commit = lambda job_id: None  # type: ignore[method-assign]

    questions = len(collect().entries)
    if not questions:
        print("no question has a frozen rubric here: nothing to export", file=sys.stderr)
        return 2
    admin = (
        User.objects.filter(is_superuser=True).first()
        or User.objects.filter(groups__name="admin").first()
    )
    client = Client()
    client.force_login(admin)

    def timed(method: str, url: str, **data) -> tuple[float, int, int]:
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            answer = getattr(client, method)(url, data)
            took = time.perf_counter() - start
        return took * 1000, answer.status_code, len(captured)

    asked = {"layout": args.layout, **({"release": args.release} if args.release else {})}
    ms, status, queries = timed("post", reverse("api_benchmark_exports"), **asked)
    if status != 202:
        print(f"the export was refused ({status})", file=sys.stderr)
        return 2
    job = Job.objects.filter(kind=export_jobs.EXPORT).latest("pk")
    print(f"POST /api/benchmark/exports/ (starts it): {ms:.1f} ms, {status}, {queries} queries")

    def gateway() -> Gateway:
        return Gateway(limiter=MemoryTokenBucket(), conf=GatewaySettings())

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu = time.process_time()
    start = time.perf_counter()
    while jobs.job_run_chunk(job_id=job.pk, gateway_factory=gateway):
        pass
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    found = export_jobs.one(job.pk)
    if found is None or found.path is None:
        print(f"the export failed: {found.error if found else 'no job'}", file=sys.stderr)
        return 1
    size = found.path.stat().st_size / 1e6
    print(
        f"the job ({args.layout}, {questions} questions): {wall:.1f} s wall, {cpu:.1f} s CPU, "
        f"peak {rss:.0f} MB (before {rss_before:.0f} MB), {size:.1f} MB zip"
    )
    times = []
    for _ in range(args.polls):
        ms, status, queries = timed("get", reverse("exports"))
        times.append(ms)
    times.sort()
    print(
        f"GET /export/ (the page): median {times[len(times) // 2]:.1f} ms, "
        f"max {times[-1]:.1f} ms, {queries} queries"
    )
    ms, status, queries = timed("get", reverse("api_benchmark_export", args=[job.pk]))
    print(f"GET /api/benchmark/exports/{job.pk}/: {ms:.1f} ms, {status}, {queries} queries")
    start = time.perf_counter()
    answer = client.get(reverse("api_benchmark_export_file", args=[job.pk]))
    first = (time.perf_counter() - start) * 1000
    total = sum(len(chunk) for chunk in answer.streaming_content)
    whole = (time.perf_counter() - start) * 1000
    print(f"GET .../file/: first byte {first:.1f} ms, all {total / 1e6:.1f} MB in {whole:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
