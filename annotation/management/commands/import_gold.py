from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.training.gold import GoldImportProblems, gold_import


class Command(BaseCommand):
    help = (
        "Import gold items (candidates with an expert's decision and note) from JSON Lines, one "
        'object a line: {"image": SOURCE_ID, "text": QUESTION, "decision": accept|revise|discard, '
        '"note": WHY, "revised_text": (with revise), "reasons": [TAGS], "training": true|false, '
        '"origin": llm|guard|import|...}. Training items make up the training set that new '
        "annotators answer first. Every line is checked first: any problem, named by its line "
        "number, imports nothing (exit status 2)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="the .jsonl file")

    def handle(self, *args, file: Path, **options):
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}", returncode=2) from exc
        try:
            made = gold_import(user=None, data=data)
        except GoldImportProblems as exc:
            for problem in exc.problems:
                self.stderr.write(f"{file}: {problem}")
            raise CommandError(
                f"{len(exc.problems)} problem(s); nothing imported.", returncode=2
            ) from exc
        training = sum(item.training for item in made)
        self.stdout.write(f"Imported {len(made)} gold item(s), {training} of them for training.")
