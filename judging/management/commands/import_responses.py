import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.images.importing import ImportProblems, problems_shown
from judging.runs.importing import responses_import, responses_parse


class Command(BaseCommand):
    help = (
        "Import evaluated models' responses from a JSONL file: one JSON object a line with "
        "source_id, model, setting (multimodal|text_only) and response. Every line is validated "
        "before anything is written; a bad line fails the whole import with exit status 2 (the "
        "first 100 problems are listed, the rest counted). "
        "Responses that exist already are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="path to FILE.jsonl")

    def handle(self, *args, file: Path, **options):
        if not file.is_file():
            raise CommandError(f"{file}: no such file", returncode=2)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise CommandError(f"{file}: not UTF-8 text (byte {exc.start})", returncode=2) from exc
        try:
            entries = responses_parse(lines)
        except ImportProblems as exc:
            for problem in problems_shown(exc.problems):
                self.stderr.write(f"{file}: {problem}")
            self.stderr.write(f"{len(exc.problems)} bad line(s); nothing was imported.")
            sys.exit(2)
        result = responses_import(entries)
        for name in result.new_models:
            self.stdout.write(f"new model {name}")
        for source_id, model, setting in result.skipped:
            self.stdout.write(f"skipped {source_id} {model} {setting}: already imported")
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {result.imported} response(s), skipped {len(result.skipped)}"
            )
        )
