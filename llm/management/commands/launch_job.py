"""Launch an LLM job from the command line, as the job console (/jobs/) or the judging runs
page does: the same scope, estimate and launch services. Exit status 0 when it was launched
(with --wait: when every item is done), 1 when some items failed (listed), 2 for bad arguments
or a launch that is refused, 3 when the task queue is unreachable (nothing was saved)."""

from __future__ import annotations

import sys
import time
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.errors import Unavailable
from llm import jobs, launchers
from llm.models import Job, JobStatus

JUDGING = ("collect", "judge")
FAILURES_LISTED = 50
QUEUE_DOWN = 3  # exit status: the broker is unreachable; nothing was saved, run it again later


def _refuse(message: str) -> CommandError:
    return CommandError(message, returncode=2)


class Command(BaseCommand):
    help = (
        "Launch an LLM job over a scope: a construction stage (generate, guard, build, "
        "refine1, refine2) or a judging run (collect, judge). Prints the estimate first. "
        "Exit status: 0 launched (with --wait: every item done), 1 some items failed, "
        "2 bad arguments or refused, 3 the task queue (Redis) is unreachable: nothing was "
        "launched or saved, run it again once it is back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        stages = [launcher.key for launcher in launchers.all_launchers()]
        parser.add_argument("stage", choices=[*stages, *JUDGING], help="the stage to launch")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--all", action="store_true", help="every eligible item (the default)")
        scope.add_argument(
            "--ids",
            nargs="+",
            metavar="SOURCE_ID",
            help="only the items of these images' source ids",
        )
        parser.add_argument(
            "--domain", default="", help="filter: the images' domain (construction stages)"
        )
        parser.add_argument(
            "--state",
            default="",
            help="filter: the stage's state, e.g. no_candidates or llm_draft "
            "(construction stages; see GET /api/jobs/stages/)",
        )
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="fresh calls: nothing answered from the ledger's cache",
        )
        parser.add_argument(
            "--estimate-only", action="store_true", help="print the estimate and launch nothing"
        )
        parser.add_argument(
            "--wait", action="store_true", help="wait for the job to end, with a progress bar"
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=2.0,
            metavar="SECONDS",
            help="how often --wait reads the job (default 2)",
        )
        parser.add_argument(
            "--user", default="", help="the admin recorded as launching it (default: none)"
        )
        parser.add_argument(
            "--progress",
            choices=["auto", "always", "never"],
            default="auto",
            help="the progress bar of --wait, on stderr (auto: on a terminal)",
        )
        judging = parser.add_argument_group("judging runs (collect, judge)")
        judging.add_argument("--model", default="", help="collect: the evaluated model's name")
        judging.add_argument("--setting", default="", help="collect: multimodal or text_only")
        judging.add_argument("--judge", default="", help="judge: the judge's name")
        judging.add_argument(
            "--judge-models",
            nargs="+",
            default=[],
            metavar="NAME",
            help="judge: only these evaluated models",
        )
        judging.add_argument(
            "--judge-settings",
            nargs="+",
            default=[],
            metavar="SETTING",
            help="judge: only these settings",
        )
        judging.add_argument(
            "--batch", action="store_true", help="judge: through Gemini's Batch API"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = self._user(options["user"])
        try:
            if options["stage"] in JUDGING:
                job = self._judging(options, user)
            else:
                job = self._construction(options, user)
        except Unavailable as exc:
            # Rolled back: no job was saved, so running the command again is safe.
            raise CommandError(exc.message, returncode=QUEUE_DOWN) from exc
        if job is None:
            return
        self.stdout.write(
            f"job {job.pk} launched: {job.items_total} item(s) "
            f"(watch it at /jobs/{job.pk}/ or GET /api/jobs/{job.pk}/)"
        )
        if options["wait"]:
            self._wait(job, options)

    def _user(self, username: str) -> User | None:
        if not username:
            return None
        user = User.objects.filter(username=username).first()
        if user is None or not user.is_staff:
            raise _refuse(f"--user: {username!r} is no admin")
        return user

    # --- construction stages: llm/launchers.py, as the console --------------------------------

    def _construction(self, options: dict[str, Any], user: User | None) -> Job | None:
        launcher = launchers.get_launcher(options["stage"])
        assert launcher is not None  # argparse's choices
        for name in ("model", "setting", "judge", "judge_models", "judge_settings", "batch"):
            if options[name]:
                raise _refuse(
                    f"--{name} is for the judging runs (collect, judge), not {launcher.key}"
                )
        filtered = bool(options["domain"] or options["state"])
        if filtered and options["ids"]:
            raise _refuse(
                "--domain/--state filter the stage's items; --ids chooses them: "
                "give one or the other"
            )
        scope = launchers.scope_from(
            launcher,
            scope="filter" if filtered else ("chosen" if options["ids"] else "all"),
            ids_text="\n".join(options["ids"] or []),
            domain=options["domain"],
            state=options["state"],
        )
        try:
            est, matched, skipped = launchers.scope_estimate(launcher, scope)
        except jobs.JobError as exc:
            raise _refuse(str(exc)) from exc
        self.stdout.write(
            f"{launcher.label}: {est.items} {launcher.scope_noun} with {est.model}; "
            f"{est.calls_min}-{est.calls_max} calls, {est.tokens_in_min}-{est.tokens_in_max} "
            f"tokens in, {est.tokens_out_min}-{est.tokens_out_max} out, "
            f"cost {est.cost_min:.4f}-{est.cost_max:.4f}"
            + (f" ({skipped} of {matched} chosen left out: not eligible)" if skipped else "")
        )
        if options["estimate_only"]:
            return None
        try:
            return launcher.launch(user=user, ids=scope.ids, fresh=options["fresh"])
        except jobs.JobError as exc:
            raise _refuse(str(exc)) from exc

    # --- judging runs: judging/runs/services.py, as the runs page ----------------------------

    def _judging(self, options: dict[str, Any], user: User | None) -> Job | None:
        from django import forms

        from judging.models import EvaluatedModel, Judge, Setting
        from judging.runs.services import question_ids, run_estimate, run_launch

        what = options["stage"]
        if options["domain"] or options["state"]:
            raise _refuse(
                "--domain and --state filter the construction stages; a judging run takes --ids"
            )
        try:
            data: dict[str, Any] = {
                "ids": question_ids(options["ids"] or []),
                "fresh": options["fresh"],
            }
        except forms.ValidationError as exc:
            raise _refuse(f"--ids: {exc.messages[0]}") from exc
        if what == "collect":
            if not options["model"] or options["setting"] not in Setting.values:
                raise _refuse(
                    f"collect needs --model NAME and --setting ({' or '.join(Setting.values)})"
                )
            data["model"] = EvaluatedModel.objects.filter(
                name=options["model"], llm_model__isnull=False
            ).first()
            if data["model"] is None:
                raise _refuse(
                    f"--model: no evaluated model {options['model']!r} with an LLM model to call"
                )
            data["setting"] = options["setting"]
        else:
            data["judge"] = Judge.objects.filter(
                name=options["judge"], llm_model__isnull=False
            ).first()
            if data["judge"] is None:
                raise _refuse(f"--judge: no judge {options['judge']!r} with an LLM model to call")
            data["models"] = list(EvaluatedModel.objects.filter(name__in=options["judge_models"]))
            if len(data["models"]) != len(set(options["judge_models"])):
                raise _refuse(f"--judge-models: unknown among {', '.join(options['judge_models'])}")
            unknown = [s for s in options["judge_settings"] if s not in Setting.values]
            if unknown:
                raise _refuse(f"--judge-settings: unknown setting {unknown[0]!r}")
            data["settings"], data["batch"] = options["judge_settings"], options["batch"]
        try:
            est = run_estimate(what, data)
        except jobs.JobError as exc:
            raise _refuse(str(exc)) from exc
        self.stdout.write(
            f"{what}: {est.items} item(s) with {est.model}; at most {est.calls} "
            f"calls, {est.tokens_in} tokens in, {est.tokens_out} out, cost "
            f"{est.cost:.4f}. {est.note}"
        )
        if options["estimate_only"]:
            return None
        try:
            return run_launch(user=user, what=what, data=data)
        except jobs.JobError as exc:
            raise _refuse(str(exc)) from exc

    # --- waiting ----------------------------------------------------------------------------

    def _wait(self, job: Job, options: dict[str, Any]) -> None:
        show = {"auto": sys.stderr.isatty(), "always": True, "never": False}[options["progress"]]
        bar = tqdm(
            total=job.items_total,
            unit=" items",
            desc=f"job {job.pk}",
            disable=not show,
            file=sys.stderr,
        )
        try:
            while True:
                job.refresh_from_db()
                bar.n = job.items_total - job.items_remaining
                bar.set_postfix(
                    done=job.items_done, failed=job.items_failed, status=job.status, refresh=False
                )
                bar.refresh()
                if job.status in jobs.OVER:
                    break
                time.sleep(options["poll"])
        finally:
            bar.close()
        self.stdout.write("\n".join(jobs.outcome_lines(job, failures=FAILURES_LISTED)))
        if job.items_failed or job.status != JobStatus.DONE:
            raise CommandError(
                f"job {job.pk}: {job.items_failed} item(s) failed"
                if job.items_failed
                else f"job {job.pk} is {job.status}",
                returncode=1,
            )
