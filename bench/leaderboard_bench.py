"""Time the whole leaderboard against a plain Python loop over the verdict rows, and check that
both give the same scores.

    DATABASE_URL=... .venv/bin/python bench/leaderboard_bench.py [--repeat 5] [--no-cold]

Run it on a database that bench/generate_judging_data.py filled. It measures:

  leaderboard  judging.leaderboard.board.leaderboard() for every judge and both settings, as the
               page computes them (audit=True): rows, tier scores, bootstrap intervals, the
               breakdowns by domain and popularity, the paired comparisons, and the scores
               corrected by the random human audit (PPI++, from the audited pairs only).
               "cold" is the first call in a fresh process (a child
               started for it: new connection, nothing cached in Python); "warm" is the
               median and the best of --repeat more calls in this process. The database's
               own cache (the OS page cache for SQLite, shared buffers for PostgreSQL) is warm
               in both: emptying it needs root and would disturb other work on the machine.
  loop         the independent computation: one query fetching every verdict with its model,
               setting, question, rubric version and tier, counted in a plain Python loop
               (only the verdicts of each question's final version, the latest frozen one),
               then judging/verdicts/scoring.py's response_score and model_score per (model,
               setting), and per domain and popularity band. It reads no ResponseTierCount row.

It prints both times and their ratio, and compares the two computations for every (judge,
setting, model): the Gamut score x100, the three tier scores and every breakdown cell to
1e-9, and the numbers of scored, failed and pending questions exactly. The exit status is 1
when any of them differs (the targets, both boards of a judge in 0.5 s warm and at least 10
times faster than the loop, are reported, not enforced). Figures go to
--out, by default bench/out/leaderboard-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from annotation.models import FinalQuestion  # noqa: E402
from judging.leaderboard.board import Leaderboard, leaderboard  # noqa: E402
from judging.models import (  # noqa: E402
    EvaluatedModel,
    Judge,
    Response,
    ResponseTierCount,
    Setting,
    Verdict,
)
from judging.verdicts.scoring import (  # noqa: E402
    DEFAULT_SETTINGS,
    FAILED,
    TIERS,
    ResponseScore,
    ScoringSettings,
    Unscored,
    model_score,
    response_score,
)
from rubrics.models import RubricCheck, RubricVersion  # noqa: E402

TARGET_SECONDS = 0.5  # both boards of one judge, warm (issue 13, section 6)
TARGET_RATIO = 10.0  # times faster than the plain loop
TOLERANCE = 1e-9


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="warm runs of the whole leaderboard (default 5)"
    )
    parser.add_argument(
        "--no-cold", action="store_true", help="skip the cold run in a fresh process"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the figures (default bench/out/leaderboard-<time>.json)",
    )
    parser.add_argument("--cold-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.repeat <= 100:
        parser.error("--repeat must be between 1 and 100")
    return args


# --- the leaderboard ------------------------------------------------------------------------


def pairs() -> list[tuple[Judge, str]]:
    return [
        (judge, setting) for judge in Judge.objects.order_by("name") for setting in Setting.values
    ]


def all_boards(
    judge_settings: list[tuple[Judge, str]],
) -> tuple[float, float, dict[tuple[str, str], Leaderboard]]:
    """Wall and CPU seconds (this process) for every (judge, setting) leaderboard, and the
    boards."""
    boards = {}
    started, cpu = time.perf_counter(), time.process_time()
    for judge, setting in judge_settings:
        boards[(judge.name, setting)] = leaderboard(judge=judge, setting=setting, audit=True)
    return time.perf_counter() - started, time.process_time() - cpu, boards


def cold_run() -> dict[str, Any]:
    """The first leaderboards of a fresh process: a child runs this script with --cold-only."""
    done = subprocess.run(
        [sys.executable, __file__, "--cold-only"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def cold_only() -> int:
    judge_settings = pairs()  # before the clock, as the page reads its judges first
    connection.close()
    seconds, cpu, _ = all_boards(judge_settings)
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu}))
    return 0


# --- the independent loop -------------------------------------------------------------------


def loop_scores(
    judges: list[Judge], settings: ScoringSettings = DEFAULT_SETTINGS
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(judge, setting, model) -> the leaderboard's figures, from the Verdict rows."""
    questions = {
        qid: (domain, popularity)
        for qid, domain, popularity in FinalQuestion.objects.filter(
            dropped_at__isnull=True
        ).values_list("id", "image__domain", "image__popularity")
    }
    final: dict[int, int] = {}
    for version, qid in RubricVersion.objects.filter(frozen_at__isnull=False).values_list(
        "id", "rubric__question_id"
    ):
        final[qid] = max(version, final.get(qid, 0))
    n_checks = Counter(
        RubricCheck.objects.filter(deleted_at__isnull=True).values_list("version_id", flat=True)
    )
    out = {}
    for judge in judges:
        # (model, setting, question) -> tier -> verdict -> count
        counts: dict[tuple[str, str, int], dict[str, Counter]] = defaultdict(
            lambda: defaultdict(Counter)
        )
        rows = (
            Verdict.objects.filter(judge=judge)
            .values_list(
                "response__model__name",
                "response__setting",
                "response__question_id",
                "check_row__version_id",
                "check_row__tier",
                "verdict",
            )
            .order_by()
            .iterator(chunk_size=20_000)
        )
        for model, setting, qid, version, tier, verdict in rows:
            if qid in questions and version == final.get(qid):
                counts[(model, setting, qid)][tier][verdict] += 1
        outcomes: dict[tuple[str, str], list[tuple[int, ResponseScore | Unscored | None]]] = (
            defaultdict(list)
        )
        for (model, setting, qid), by_tier in counts.items():
            total = sum(sum(c.values()) for c in by_tier.values())
            outcome: ResponseScore | Unscored | None
            if any(c["failed"] for c in by_tier.values()):
                outcome = FAILED
            elif total < n_checks[final[qid]]:
                outcome = None  # pending
            else:
                outcome = response_score({tier: dict(c) for tier, c in by_tier.items()}, settings)
            outcomes[(model, setting)].append((qid, outcome))
        for (model, setting), scored in outcomes.items():
            result = model_score(o for _, o in scored if o is not None)
            cells: dict[str, dict[str, Any]] = {"domain": {}, "popularity": {}}
            for kind, position in (("domain", 0), ("popularity", 1)):
                groups: dict[str, list] = defaultdict(list)
                for qid, o in scored:
                    if o is not None:
                        groups[questions[qid][position]].append(o)
                for name, members in groups.items():
                    cell = model_score(members)
                    cells[kind][name] = (cell.gamut, cell.scored)
            out[(judge.name, setting, model)] = {
                "gamut": result.gamut,
                "tiers": result.tiers,
                "scored": result.scored,
                "failed": result.failed,
                "pending": sum(1 for _, o in scored if o is None),
                "cells": cells,
            }
    return out


# --- the comparison -------------------------------------------------------------------------


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def compare(
    boards: dict[tuple[str, str], Leaderboard], loops: dict[tuple[str, str, str], dict[str, Any]]
) -> dict[str, Any]:
    """Every figure of every row that the loop can see, side by side."""
    mismatches: list[str] = []
    max_diff = 0.0
    checked = 0

    def close(what: str, got: float | None, want: float | None) -> None:
        nonlocal max_diff
        if got is None or want is None:
            if got is not want:
                mismatches.append(f"{what}: leaderboard {got}, loop {want}")
            return
        max_diff = max(max_diff, abs(got - want))
        if abs(got - want) > TOLERANCE:
            mismatches.append(f"{what}: leaderboard {got!r}, loop {want!r}")

    seen = set()
    for (judge, setting), board in boards.items():
        for row in board.rows:
            key = (judge, setting, row.model)
            want = loops.get(key)
            if want is None:
                if row.scored or row.failed or row.pending:
                    mismatches.append(f"{key}: judged on the leaderboard, absent from the loop")
                continue
            seen.add(key)
            checked += 1
            close(f"{key} gamut", row.gamut, _x100(want["gamut"]))
            for tier in TIERS:
                close(f"{key} {tier}", row.tiers.get(tier), _x100(want["tiers"].get(tier)))
            for name in ("scored", "failed", "pending"):
                if getattr(row, name) != want[name]:
                    mismatches.append(
                        f"{key} {name}: leaderboard {getattr(row, name)}, loop {want[name]}"
                    )
            for kind, cells in (("domain", row.by_domain), ("popularity", row.by_popularity)):
                for name, cell in cells.items():
                    gamut, scored = want["cells"][kind].get(name, (None, 0))
                    close(f"{key} {kind} {name}", cell.gamut, _x100(gamut))
                    if cell.scored != scored:
                        mismatches.append(
                            f"{key} {kind} {name} scored: leaderboard {cell.scored}, loop {scored}"
                        )
    for key in sorted(set(loops) - seen):
        mismatches.append(f"{key}: in the loop, not on the leaderboard")
    return {
        "rows_checked": checked,
        "max_abs_diff_x100": max_diff,
        "tolerance": TOLERANCE,
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:10],
    }


# --- main -----------------------------------------------------------------------------------


def code_version() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "diff", "--quiet", "HEAD", "--", ".", ":!bench"], cwd=REPO
            ).returncode
            != 0
        )
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return commit + (", with uncommitted changes outside bench/" if dirty else "")


def sizes() -> dict[str, int]:
    return {
        "questions": FinalQuestion.objects.filter(dropped_at__isnull=True).count(),
        "models": EvaluatedModel.objects.count(),
        "judges": Judge.objects.count(),
        "responses": Response.objects.count(),
        "verdicts": Verdict.objects.count(),
        "tier_count_rows": ResponseTierCount.objects.count(),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cold_only:
        return cold_only()
    judge_settings = pairs()
    if not judge_settings:
        print(
            "No judge in this database: run bench/generate_judging_data.py first.", file=sys.stderr
        )
        return 2
    judges = [judge for judge, setting in judge_settings if setting == Setting.values[0]]
    size = sizes()
    print(
        f"{connection.vendor} {connection.settings_dict['NAME']}: {size['verdicts']:,} "
        f"verdicts, {size['tier_count_rows']:,} tier-count rows, {size['questions']:,} "
        f"questions, {size['models']} models, {len(judges)} judge(s) x 2 settings"
    )

    cold_figures = None if args.no_cold else cold_run()
    cold = None if cold_figures is None else cold_figures["seconds"]
    first, _, boards = all_boards(judge_settings)
    runs = [all_boards(judge_settings) for _ in range(args.repeat)]
    warm, warm_cpu = [r[0] for r in runs], [r[1] for r in runs]
    with CaptureQueriesContext(connection) as queries:
        leaderboard(judge=judges[0], setting=Setting.values[0], audit=True)
    started, cpu = time.perf_counter(), time.process_time()
    loops = loop_scores(judges)
    loop_seconds, loop_cpu = time.perf_counter() - started, time.process_time() - cpu
    agreement = compare(boards, loops)

    warm_median = statistics.median(warm)
    per_judge = {
        "cold": None if cold is None else cold / len(judges),
        "warm_median": warm_median / len(judges),
    }
    figures: dict[str, Any] = {
        "database": connection.vendor,
        "name": str(connection.settings_dict["NAME"]),
        "code": code_version(),
        "at": time.strftime("%Y-%m-%d %H:%M:%S"),
        **size,
        "leaderboards": len(judge_settings),
        "leaderboard_seconds": {
            "cold": cold,
            "first_in_process": first,
            "warm_median": warm_median,
            "warm_best": min(warm),
            "warm_runs": warm,
        },
        # This process's CPU: all of the work on SQLite; on PostgreSQL the server's is apart.
        "leaderboard_cpu_seconds": {
            "cold": None if cold_figures is None else cold_figures["cpu_seconds"],
            "warm_median": statistics.median(warm_cpu),
        },
        "load_average": os.getloadavg(),
        "leaderboard_seconds_per_judge": per_judge,
        "queries_per_leaderboard": len(queries.captured_queries),
        "loop_seconds": loop_seconds,
        "loop_cpu_seconds": loop_cpu,
        "ratio_loop_to_leaderboard": {
            "cold": None if cold is None else loop_seconds / cold,
            "warm": loop_seconds / warm_median,
        },
        "target_seconds_per_judge": TARGET_SECONDS,
        "target_met": per_judge["warm_median"] <= TARGET_SECONDS,
        "target_ratio": TARGET_RATIO,
        "target_ratio_met": loop_seconds / warm_median >= TARGET_RATIO,
        "agreement": agreement,
    }
    out = args.out or BENCH_DIR / "out" / f"leaderboard-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1) + "\n")

    cold_text = "not run" if cold is None else f"{cold:.2f} s"
    print(
        f"leaderboard, {len(judge_settings)} boards ({len(judges)} judge(s) x both settings, "
        f"breakdowns and bootstrap intervals, {figures['queries_per_leaderboard']} queries "
        f"each): cold {cold_text}, warm median {warm_median:.2f} s (best {min(warm):.2f} s "
        f"of {args.repeat})"
    )
    print(f"plain Python loop over {size['verdicts']:,} verdict rows: {loop_seconds:.2f} s")
    ratio = figures["ratio_loop_to_leaderboard"]
    print(
        f"ratio loop / leaderboard: {ratio['warm']:.1f}x warm"
        + ("" if cold is None else f", {ratio['cold']:.1f}x cold")
    )
    print(
        f"targets: at most {TARGET_SECONDS:.1f} s per judge (both settings, warm): "
        f"{'met' if figures['target_met'] else 'NOT met'}; at least {TARGET_RATIO:.0f}x the "
        f"loop: {'met' if figures['target_ratio_met'] else 'NOT met'} "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"agreement: {agreement['rows_checked']} (judge, setting, model) rows, max |diff| "
        f"{agreement['max_abs_diff_x100']:.2e} (x100 scale), {agreement['mismatches']} "
        "mismatches"
    )
    for line in agreement["first_mismatches"]:
        print(f"  {line}")
    print(f"figures: {out}")
    return 0 if agreement["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
