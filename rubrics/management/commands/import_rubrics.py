"""import_rubrics FILE.jsonl: meta-rubrics in, compiled rubric versions out, all or nothing."""

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter
from tqdm import tqdm

from annotation.images.importing import problems_shown
from core.errors import DomainError
from rubrics.importing import IMPORTABLE_STAGES, RubricImportProblems, rubrics_import, rubrics_parse
from rubrics.models import STAGE_ORDER


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, but the description keeps its line breaks: the format below is a
    layout, not prose."""


class Command(BaseCommand):
    help = f"""Import rubrics: one version per line, compiled from its meta-rubric.

Input: a JSONL file, one JSON object a line (blank lines are skipped):
  {{"source_id": "...", "meta_rubric": {{...}}, "stage": "imported"}}
source_id    the image's source id; the image must have a final question that
             is not dropped
meta_rubric  a meta-rubric document, schema_version 1 (see
             `manage.py compile_rubric --help` for its format)
stage        optional: {", ".join(IMPORTABLE_STAGES)}
             (default imported). Human rounds are made in the revision
             workspace, never imported. A rubric has at most one version of each
             stage, and a new version must come after the rubric's latest one
             in the order
             {" < ".join(STAGE_ORDER)}.

Every line is validated before anything is written. One bad line fails the
whole import: exit status 2, the problems on stderr as FILE: line N: PROBLEM
(a meta-rubric's problems with their JSON paths, e.g.
meta_rubric.items[2].baseline[0]: 9 exceeds the 7 options; the first 100
listed, the rest counted), and nothing is imported. Otherwise every version
is written in one transaction and listed on stdout."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="the rubrics")
        parser.add_argument(
            "--progress",
            choices=["auto", "always", "never"],
            default="auto",
            help="progress bar on stderr (auto: when stderr is a terminal)",
        )

    def handle(self, *args, file: Path, progress: str, **options):
        show = {"auto": sys.stderr.isatty(), "always": True, "never": False}[progress]

        def bar(desc: str, unit: str) -> Callable[[Iterable], Iterable]:
            return lambda items: tqdm(
                items, desc=desc, unit=unit, disable=not show, file=sys.stderr
            )

        if not file.is_file():
            raise CommandError(f"{file}: no such file", returncode=2)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise CommandError(f"{file}: not UTF-8 text (byte {exc.start})", returncode=2) from exc
        try:
            entries = rubrics_parse(lines, progress=bar("validating", " lines"))
            imported = rubrics_import(
                entries, file_name=str(file), progress=bar("importing", " versions")
            )
        except RubricImportProblems as exc:
            for problem in problems_shown(exc.problems):
                self.stderr.write(f"{file}: {problem}")
            self.stderr.write(f"{exc.lines} bad line(s); nothing was imported.")
            sys.exit(2)
        except DomainError as exc:
            # Something the checks above did not foresee (rubric_version_create refused):
            # the transaction was rolled back.
            raise CommandError(f"{file}: {exc.message} Nothing was imported.") from exc
        for item in imported:
            self.stdout.write(
                f"{item.source_id}: {item.stage} version {item.version.pk}, {item.checks} checks"
            )
        rubrics = len({item.source_id for item in imported})
        self.stdout.write(
            self.style.SUCCESS(f"imported {len(imported)} version(s) of {rubrics} rubric(s)")
        )
