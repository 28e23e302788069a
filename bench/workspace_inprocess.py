"""In-process cost of the workspace's endpoints: Django's test client against the database that
DATABASE_URL selects, one reviser's draft, CPU milliseconds a request (time.process_time, which
counts SQLite's work but not a PostgreSQL server's) and wall milliseconds, p50 and p95.

    export DATABASE_URL=sqlite:////tmp/gamut-inprocess.sqlite3 DEBUG=False ALLOWED_HOSTS=testserver
    .venv/bin/python manage.py migrate --noinput
    .venv/bin/python bench/generate_rubric_data.py --reset --questions 5 --checks 60 \\
        --credentials /tmp/gamut-inprocess-revisers.json
    .venv/bin/python bench/workspace_inprocess.py --rounds 40
    .venv/bin/python bench/workspace_inprocess.py --rounds 40 --profile /tmp/ws.prof  # cProfile

Each round is one GET of the page, then a text edit, a re-tier and a move of a random check.
Run it alternately with the code it is compared to: the machine's load moves both figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--reviser", default="bench-reviser-01")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="run under cProfile, write the stats to FILE and print the 40 costliest functions",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from rubrics import services
    from rubrics.models import RubricCheck, RubricVersion

    # Not setup_test_environment(): its instrumented template rendering (a signal and a copy of
    # every context) would be counted; ALLOWED_HOSTS=testserver lets the client in instead.
    user = get_user_model().objects.get(username=args.reviser)
    version = services.revision_claim(user=user)
    if version is None:
        raise SystemExit("no rubric waits for a human round: run generate_rubric_data.py")
    client = Client()
    client.force_login(user)
    base = f"/rubrics/versions/{version.pk}/"
    htmx = {"HTTP_HX_REQUEST": "true"}
    rng = random.Random(args.seed)
    pks = list(
        RubricCheck.objects.filter(version=version, deleted_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    revision = RubricVersion.objects.get(pk=version.pk).revision
    figures: dict[str, list[tuple[float, float]]] = {}

    def timed(name, send) -> int:
        cpu, wall = time.process_time(), time.perf_counter()
        response = send()
        figures.setdefault(name, []).append(
            ((time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000)
        )
        if response.status_code != 200:
            raise SystemExit(f"{name}: {response.status_code} {response.content[:300]!r}")
        return response.status_code

    client.get(base)  # the first request imports the URLconf and the views: not counted
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    for n in range(args.rounds):
        timed("workspace", lambda: client.get(base))
        pk = rng.choice(pks)
        edits = [
            ("edit_text", "text", {"text": f"The response states edit {n}."}),
            ("retier", "tier", {"tier": rng.choice(services.TIERS)}),
            ("move", "move", {"direction": rng.choice(("up", "down"))}),
        ]
        for name, path, data in edits:
            url = f"{base}checks/{pk}/{path}/"
            timed(
                name,
                lambda url=url, data=data, revision=revision: client.post(
                    url, {**data, "revision": revision}, **htmx
                ),
            )
            revision += 1
    if profiler is not None:
        import pstats

        profiler.disable()
        profiler.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(40)
    print(f"{args.rounds} rounds on version {version.pk} ({len(pks)} checks)")
    for name, values in figures.items():
        cpu = sorted(v[0] for v in values)
        wall = sorted(v[1] for v in values)
        p95 = int(0.95 * (len(values) - 1))
        print(
            f"  {name:10s} cpu p50 {statistics.median(cpu):6.1f} p95 {cpu[p95]:6.1f} ms"
            f"   wall p50 {statistics.median(wall):6.1f} p95 {wall[p95]:6.1f} ms"
        )


if __name__ == "__main__":
    main()
