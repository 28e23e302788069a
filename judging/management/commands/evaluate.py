"""Evaluate a model on a release in one command: collect the answers it lacks, have the
release's judges grade them, and print its row, rank and paired differences on each board.
Exit status 0 when launched (with --wait: every item done), 1 when some items failed (listed;
run the command again to continue where it stopped), 2 for bad arguments or nothing to do, 3
when the task queue is unreachable (nothing was saved)."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import Unavailable
from judging.models import Setting
from judging.runs.evaluate import (
    EvaluateError,
    EvaluateEstimate,
    EvaluatePlan,
    ResultRow,
    StepProgress,
    duration,
    evaluate_estimate,
    evaluate_launch,
    evaluate_plan,
    evaluate_progress,
    evaluate_result,
)
from llm import jobs
from llm.models import Job, JobStatus

FAILURES_LISTED = 20
QUEUE_DOWN = 3
BAR_WIDTH = 30


def _refuse(message: str) -> CommandError:
    return CommandError(message, returncode=2)


def bar(step: StepProgress) -> str:
    """A line of a step: its name, a bar and its counts."""
    filled = round(BAR_WIDTH * step.done / step.total) if step.total else BAR_WIDTH
    return (
        f"  {step.label:<34} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
        f"{step.done}/{step.total} ({step.percent:g}%)"
    )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def result_lines(plan: EvaluatePlan, results: list[ResultRow]) -> list[str]:
    lines = [f"{plan.model.name} on release {plan.release.name}:"]
    for result in results:
        row = result.row
        where = f"{Setting(result.setting).label}, judged by {result.judge}"
        if row is None or row.gamut is None:
            waiting = f"{row.pending} waiting for verdicts, " if row else ""
            lines.append(f"  {where}: no score yet ({waiting}nothing scored)")
            continue
        lines.append(
            f"  {where}: Gamut {_num(row.gamut)} (95% interval {_num(row.low)} to "
            f"{_num(row.high)}), rank {result.rank} of {result.ranked}; "
            f"{row.scored} of {row.questions} questions scored"
            + (f", {row.pending} waiting" if row.pending else "")
            + (f", {row.failed} with a failed verdict" if row.failed else "")
        )
        audited = result.audited
        lines.append(
            f"    corrected by the human audit: {_num(audited['estimate'])} "
            f"({_num(audited['ci_low'])} to {_num(audited['ci_high'])}), "
            f"from {audited['pairs']} audited checks"
            if audited
            else "    corrected by the human audit: no audit of this judge and setting yet"
        )
        for n in result.neighbours:
            told = "told apart" if n.significant else "not told apart"
            interval = (
                f"({_signed(n.low)} to {_signed(n.high)})"
                if n.low is not None
                else "(no interval from one question)"
            )
            lines.append(
                f"    vs {n.model} (rank {n.rank}): {_signed(n.difference)} {interval} over "
                f"{n.questions} shared question{'' if n.questions == 1 else 's'}, {told}"
                + (f" (Holm p {n.p_holm:.3f})" if n.p_holm is not None else "")
            )
        if not result.neighbours:
            lines.append("    no other model is ranked on this board")
    return lines


def estimate_lines(plan: EvaluatePlan, est: EvaluateEstimate) -> list[str]:
    lines = [
        f"Evaluate {plan.model.name} on release {plan.release.name} "
        f"({', '.join(Setting(s).label for s in plan.settings)}; judges: "
        f"{', '.join(j.name for j in plan.judges)})",
        f"  {est.items} item(s), at most {est.calls} calls, {est.tokens_in} tokens in, "
        f"{est.tokens_out} out, cost {est.cost:.4f}; time at the models' quotas: "
        f"{duration(est.seconds)}",
    ]
    for step in est.steps:
        what = "answer" if step.step == "collect" else "judge"
        lines.append(
            f"    {what:<6} {step.who:<24} {Setting(step.setting).label:<10} "
            f"{step.responses:>5} response(s) {step.calls:>6} calls with {step.model}, "
            f"cost {step.cost:.4f}"
        )
    for quota in est.quotas:
        limits = (
            f"{quota.requests_per_minute} requests/min"
            if quota.requests_per_minute
            else "no request limit"
        ) + (f", {quota.tokens_per_minute} tokens/min" if quota.tokens_per_minute else "")
        lines.append(
            f"    {quota.model}: {quota.calls} calls at {limits}: {duration(quota.seconds)}"
        )
    lines.append(f"  {est.note}")
    return lines


class Command(BaseCommand):
    help = (
        "Evaluate a model on a release: collect the answers it lacks on the release's "
        "questions, have the release's judges grade them (one job), and print its score, "
        "interval, audited score, rank and paired differences to the models ranked next to "
        "it. Exit status: 0 launched (with --wait: every item done), 1 some items failed (run "
        "it again to continue), 2 bad arguments, 3 the task queue is unreachable (nothing "
        "was saved). With nothing left to do, it prints the result."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("model", help="the evaluated model's name")
        parser.add_argument("--release", required=True, help="the release's name, e.g. v1.0")
        parser.add_argument(
            "--setting",
            action="append",
            default=[],
            choices=Setting.values,
            help="a setting to evaluate in (repeat for both; default: both)",
        )
        parser.add_argument(
            "--judge",
            action="append",
            default=[],
            metavar="NAME",
            help="a judge to grade with (repeat; default: every judge that has scored the "
            "release and calls a model)",
        )
        parser.add_argument(
            "--estimate-only", action="store_true", help="print the estimate and launch nothing"
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="wait for the run to end, printing each step's progress, then the result",
        )
        parser.add_argument(
            "--poll", type=float, default=5.0, metavar="SECONDS", help="how often --wait reads"
        )
        parser.add_argument(
            "--user", default="", help="the admin recorded as launching it (default: none)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = self._user(options["user"])
        try:
            plan = evaluate_plan(
                model=options["model"],
                release=options["release"],
                settings=options["setting"],
                judges=options["judge"],
            )
        except EvaluateError as exc:
            raise _refuse(exc.message) from exc
        try:
            est = evaluate_estimate(plan)
        except jobs.JobError as exc:
            self.stdout.write(str(exc))
            self.stdout.write("\n".join(result_lines(plan, evaluate_result(plan))))
            return
        self.stdout.write("\n".join(estimate_lines(plan, est)))
        if options["estimate_only"]:
            return
        try:
            job = evaluate_launch(user=user, plan=plan)
        except jobs.JobError as exc:
            raise _refuse(str(exc)) from exc
        except Unavailable as exc:
            raise CommandError(exc.message, returncode=QUEUE_DOWN) from exc
        self.stdout.write(
            f"job {job.pk} launched: {job.items_total} item(s) "
            f"(watch it at /judging/runs/evaluate/{job.pk}/ or GET /api/judging/evaluate/{job.pk}/)"
        )
        if options["wait"]:
            self._wait(plan, job, options["poll"])

    def _user(self, username: str) -> User | None:
        if not username:
            return None
        user = User.objects.filter(username=username).first()
        if user is None or not user.is_staff:
            raise _refuse(f"--user: {username!r} is no admin")
        return user

    def _wait(self, plan: EvaluatePlan, job: Job, poll: float) -> None:
        shown: list[tuple[int, int]] = []
        while True:
            job.refresh_from_db()
            steps = evaluate_progress(plan)
            counts = [(s.done, s.total) for s in steps]
            over = job.status in jobs.OVER
            if counts != shown or over:
                self.stdout.write(
                    f"job {job.pk} {job.status}: {job.items_done + job.items_failed} of "
                    f"{job.items_total} item(s) over"
                )
                self.stdout.write("\n".join(bar(s) for s in steps))
                shown = counts
            if over:
                break
            time.sleep(poll)
        self.stdout.write("\n".join(jobs.outcome_lines(job, failures=FAILURES_LISTED)))
        self.stdout.write("\n".join(result_lines(plan, evaluate_result(plan))))
        if job.items_failed or job.status != JobStatus.DONE:
            raise CommandError(
                f"job {job.pk}: {job.items_failed} item(s) failed; run the command again to "
                "continue where it stopped"
                if job.items_failed
                else f"job {job.pk} is {job.status}",
                returncode=1,
            )
