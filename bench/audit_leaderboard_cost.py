"""What the random audit adds to the leaderboard: time and queries of `leaderboard(audit=True)`
against `leaderboard()` on the database DATABASE_URL selects, after bench/generate_judging_data.py.

    DATABASE_URL=sqlite:////abs/x.sqlite3 .venv/bin/python bench/audit_leaderboard_cost.py \\
        [--pairs 1000] [--agree 0.85] [--repeat 5]

It draws an audit of --pairs pairs (judging.spot_checks.audit.audit_draw, no second grades),
grades each with the judge's own verdict, changed to another one at random on 1 - --agree of them (a
bench user "bench-auditor" grades), then times both boards of the first judge warm, with and
without the audit, and prints the medians, the queries and each model's corrected Gamut score
beside the judge's. It refuses a database that already has audit pairs unless --reset-audit
(which deletes the spot checks first).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from judging.leaderboard.board import leaderboard  # noqa: E402
from judging.models import Judge, Setting, SpotCheck, Verdict  # noqa: E402
from judging.spot_checks.audit import audit_draw  # noqa: E402
from judging.spot_checks.services import GRADES  # noqa: E402


def _timed(repeat: int, **kwargs) -> tuple[float, int, object]:
    leaderboard(**kwargs)  # warm: imports (ppi_py), caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            board = leaderboard(**kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(queries), board


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--agree", type=float, default=0.85)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reset-audit", action="store_true")
    args = parser.parse_args()

    if SpotCheck.objects.exists():
        if not args.reset_audit:
            sys.exit("this database has spot checks already; --reset-audit deletes them")
        SpotCheck.objects.all().delete()
    judge = Judge.objects.order_by("name").first()
    user, _ = User.objects.get_or_create(username="bench-auditor")
    start = time.perf_counter()
    drawn = audit_draw(count=args.pairs, double_share=0, user=user, seed=args.seed)
    print(f"audit of {drawn} pairs drawn in {time.perf_counter() - start:.1f} s")
    rng = random.Random(args.seed)
    verdicts = {
        (r, c): v
        for r, c, v in Verdict.objects.filter(
            judge=judge, response_id__in=SpotCheck.objects.values("response_id")
        ).values_list("response_id", "check_row_id", "verdict")
    }
    now = timezone.now()
    spots = list(SpotCheck.objects.all())
    for spot in spots:
        judged = verdicts.get((spot.response_id, spot.check_row_id), "meets")
        judged = judged if judged in GRADES else "missing"
        if rng.random() >= args.agree:
            judged = rng.choice([g for g in GRADES if g != judged])
        spot.verdict, spot.graded_by, spot.graded_at = judged, user, now
    SpotCheck.objects.bulk_update(spots, ["verdict", "graded_by", "graded_at"], batch_size=500)
    for setting in Setting.values:
        plain, plain_queries, _ = _timed(args.repeat, judge=judge, setting=setting)
        audited, audited_queries, board = _timed(
            args.repeat, judge=judge, setting=setting, audit=True
        )
        print(
            f"{setting}: {plain:.3f} s ({plain_queries} queries) without the audit, "
            f"{audited:.3f} s ({audited_queries} queries) with it: +{audited - plain:.3f} s"
        )
        for row in board.rows[:3]:
            c = row.audited
            print(
                f"  {row.model}: judge {row.gamut:.1f}, corrected {c['estimate']:.1f} "
                f"[{c['ci_low']:.1f}, {c['ci_high']:.1f}] on {c['pairs']} pairs"
            )


if __name__ == "__main__":
    main()
