"""release create|list|show|diff: cut, list, read and compare releases of the benchmark."""

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter
from django.template.defaultfilters import pluralize

from judging.models import Judge, Release, Setting
from judging.releases.diff import release_diff
from judging.releases.scores import release_board
from judging.releases.selectors import release_named, releases
from judging.releases.services import ReleaseError, create_release

DRAFT_WORD = "draft"


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, but the description keeps its line breaks."""


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


class Command(BaseCommand):
    help = """Releases: frozen versions of the benchmark.

  release create NAME [--notes TEXT]   cut a release of the current state: every final
                                       question not dropped whose rubric has a frozen
                                       version, on that version, with the scoring
                                       parameters and domains in force; prints its hash
  release list                         every release, newest first
  release show NAME                    what a release holds, its hash and parameters, and
                                       each judge's scores on it per setting, with the
                                       responses that still wait for verdicts on it
  release diff A B                     what changed from release A to B (B may be "draft",
                                       the working draft): questions added and dropped,
                                       checks added, removed, reworded and re-tiered, and
                                       per judge, setting and model the score change over
                                       the questions both hold, with its 95% interval

A release never changes. Exit status 2 (the reason on stderr) for a name that is
taken or malformed, a release that does not exist, or nothing to release."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        create = actions.add_parser(
            "create", help="cut a release of the current state", formatter_class=_HelpFormatter
        )
        create.add_argument(
            "name", metavar="NAME", help="its name, e.g. v1.0 (at most 40 characters)"
        )
        create.add_argument("--notes", default="", help="what it is (at most 2000 characters)")
        actions.add_parser("list", help="every release, newest first")
        show = actions.add_parser("show", help="what a release holds, and its scores")
        show.add_argument("name", metavar="NAME")
        show.add_argument("--json", dest="as_json", action="store_true", help="as JSON")
        diff = actions.add_parser("diff", help="what changed from release A to B")
        diff.add_argument("a", metavar="A", help="a release name")
        diff.add_argument("b", metavar="B", help=f'a release name, or "{DRAFT_WORD}"')
        diff.add_argument(
            "--judge", action="append", default=[], help="only this judge (repeatable)"
        )
        diff.add_argument(
            "--setting",
            action="append",
            default=[],
            choices=[s.value for s in Setting],
            help="only this setting (repeatable)",
        )
        diff.add_argument("--json", dest="as_json", action="store_true", help="as JSON")

    def handle(self, *args, action: str, **options):
        return getattr(self, f"_{action}")(**options)

    def _release(self, name: str, *, draft: bool = False) -> Release | None:
        if draft and name == DRAFT_WORD:
            return None
        found = release_named(name)
        if found is None:
            known = ", ".join(r.name for r in releases()[:10]) or "none yet"
            raise CommandError(f"No release named {name} (releases: {known}).", returncode=2)
        return found

    def _create(self, *, name: str, notes: str, **_):
        try:
            release = create_release(name, notes)
        except ReleaseError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"released {release.name}: {release.questions.count()} question(s), "
                f"content hash {release.content_hash}"
            )
        )

    def _list(self, **_):
        found = list(releases())
        if not found:
            self.stdout.write("No release yet: `manage.py release create NAME` cuts one.")
        for release in found:
            self.stdout.write(
                f"{release.name}\t{release.created_at:%Y-%m-%d %H:%M}\t"
                f"{release.n_questions} question{pluralize(release.n_questions)}\t"
                f"{release.content_hash}"
            )

    def _show(self, *, name: str, as_json: bool, **_):
        release = self._release(name)
        assert release is not None
        boards = [
            release_board(release, judge=judge, setting=setting)
            for judge in Judge.objects.order_by("name")
            for setting in Setting
        ]
        if as_json:
            self.stdout.write(_dumps(_show_dict(release, boards)))
            return
        self.stdout.write(f"release {release.name}, cut {release.created_at:%Y-%m-%d %H:%M}")
        if release.notes:
            self.stdout.write(f"notes: {release.notes}")
        self.stdout.write(f"content hash: {release.content_hash}")
        held = release.questions.count()
        self.stdout.write(
            f"{held} question{pluralize(held)}; domains: {', '.join(release.domains)}"
        )
        s = release.scoring_settings()
        self.stdout.write(
            f"scoring: lambda {s.lambda_}, mu {s.mu}, tier weights "
            f"{s.weights[0]} / {s.weights[1]} / {s.weights[2]} (answer-critical / valuable / "
            "context)"
        )
        for found in boards:
            if not found.board.rows:
                continue
            self.stdout.write(f"\njudge {found.board.judge}, {Setting(found.board.setting).label}:")
            for row in found.board.rows:
                self.stdout.write(
                    f"  {row.model}\t{_fmt(row.gamut)} ({_fmt(row.low)} to {_fmt(row.high)})\t"
                    f"scored {row.scored}, pending {row.pending}, missing {row.missing}, "
                    f"failed {row.failed}"
                )
            if found.pending:
                line = f"  {found.pending} response(s) wait for verdicts on this release"
                if found.estimate is not None:
                    e = found.estimate
                    line += (
                        f": {e.calls} call(s) of {e.model}, about {e.tokens_in:,} tokens in "
                        f"and {e.tokens_out:,} out, ${e.cost:.2f}"
                    )
                else:
                    line += f" ({found.estimate_note})"
                self.stdout.write(line)

    def _diff(self, *, a: str, b: str, judge: list[str], setting: list[str], as_json: bool, **_):
        first, second = self._release(a, draft=True), self._release(b, draft=True)
        judges = None
        if judge:
            judges = list(Judge.objects.filter(name__in=judge))
            unknown = sorted(set(judge) - {j.name for j in judges})
            if unknown:
                raise CommandError(f"No judge named {', '.join(unknown)}.", returncode=2)
        diff = release_diff(first, second, judges=judges, settings=setting or None)
        if as_json:
            self.stdout.write(_dumps(diff.as_dict()))
            return
        self.stdout.write(f"from {diff.label_a} to {diff.label_b}")
        self.stdout.write(
            f"questions: {len(diff.added)} added, {len(diff.dropped)} dropped, "
            f"{len(diff.changed)} with another rubric version, {diff.unchanged} unchanged"
        )
        for source_id in diff.added:
            self.stdout.write(f"  + {source_id}")
        for source_id in diff.dropped:
            self.stdout.write(f"  - {source_id}")
        t = diff.totals()
        self.stdout.write(
            f"checks: {t['added']} added, {t['removed']} removed, {t['reworded']} reworded, "
            f"{t['re-tiered']} re-tiered"
        )
        for question in diff.changed:
            self.stdout.write(f"  {question.source_id}:")
            for c in question.checks:
                detail = {
                    "added": f"at {c.tier}: {c.text}",
                    "removed": f"was at {c.tier}: {c.text}",
                    "reworded": f"{c.text_before!r} -> {c.text!r}",
                    "re-tiered": f"{c.tier_before} -> {c.tier}",
                }[c.change]
                self.stdout.write(f"    {c.check_id} {c.change}: {detail}")
        if diff.scoring_a != diff.scoring_b:
            self.stdout.write(f"scoring: {diff.scoring_a} -> {diff.scoring_b}")
        if diff.shifts:
            self.stdout.write("\nscore change (B - A, x100, over the questions both hold):")
        for shift in diff.shifts:
            ch = shift.change
            interval = (
                f"({_fmt(ch.low)} to {_fmt(ch.high)})"
                if ch.low is not None
                else "(no interval: too few questions)"
            )
            self.stdout.write(
                f"  {shift.judge}, {Setting(shift.setting).label}, {shift.model}: "
                f"{_fmt(shift.score_a)} -> {_fmt(shift.score_b)}, moved {_signed(ch.difference)} "
                f"{interval} on {ch.n} question(s)"
            )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str)


def _show_dict(release: Release, boards: list) -> dict:
    s = release.scoring_settings()
    return {
        "name": release.name,
        "notes": release.notes,
        "created_at": release.created_at.isoformat(),
        "content_hash": release.content_hash,
        "questions": release.questions.count(),
        "domains": release.domains,
        "scoring": {"lambda": s.lambda_, "mu": s.mu, "weights": list(s.weights)},
        "boards": [
            {
                "judge": found.board.judge,
                "setting": found.board.setting,
                "rows": [row.as_dict() for row in found.board.rows],
                "pending": found.pending,
                "estimate": None
                if found.estimate is None
                else {
                    "calls": found.estimate.calls,
                    "tokens_in": found.estimate.tokens_in,
                    "tokens_out": found.estimate.tokens_out,
                    "cost": str(found.estimate.cost),
                    "model": found.estimate.model,
                },
            }
            for found in boards
            if found.board.rows
        ],
    }
