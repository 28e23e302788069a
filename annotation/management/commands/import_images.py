import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotation.images.importing import (
    ImportProblems,
    images_import,
    manifest_parse,
    problems_shown,
)
from annotation.models import ImportBatch


class Command(BaseCommand):
    help = (
        "Import images from a JSONL manifest: one JSON object a line with source_id, image "
        "(path relative to the manifest), entity, domain, popularity (head|torso|tail), "
        "and optionally egocentric (bool) and candidates (question texts for round 1). "
        "Every line is validated before anything is written; a bad line fails the whole import "
        "with exit status 2 (the first 100 problems are listed, the rest counted). Each image "
        "must be a JPEG, PNG, WebP or GIF file within IMPORT_MAX_FILE_BYTES and the image caps "
        "(IMAGE_MAX_PIXELS, _SIDE, _FRAMES, _METADATA_BYTES), and is stored under the "
        "extension of its format. Source ids that "
        "exist already are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("manifest", type=Path, help="path to MANIFEST.jsonl")
        parser.add_argument(
            "--progress",
            choices=["auto", "always", "never"],
            default="auto",
            help="progress bar on stderr (auto: when stderr is a terminal)",
        )

    def handle(self, *args, manifest: Path, progress: str, **options):
        if not manifest.is_file():
            raise CommandError(f"{manifest}: no such file", returncode=2)
        show = {"auto": sys.stderr.isatty(), "always": True, "never": False}[progress]

        def bar(desc):
            return lambda items: tqdm(
                items,
                desc=desc,
                unit=" lines" if desc == "validating" else " images",
                disable=not show,
                file=sys.stderr,
            )

        try:
            with manifest.open(encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except UnicodeDecodeError as exc:
            raise CommandError(
                f"{manifest}: not UTF-8 text (byte {exc.start})", returncode=2
            ) from exc
        try:
            entries = manifest_parse(lines, manifest.resolve().parent, progress=bar("validating"))
        except ImportProblems as exc:
            for problem in problems_shown(exc.problems):
                self.stderr.write(f"{manifest}: {problem}")
            self.stderr.write(f"{len(exc.problems)} problem(s); nothing was imported.")
            sys.exit(2)
        result = images_import(
            entries,
            actor=None,
            source=ImportBatch.Source.COMMAND,
            file_name=str(manifest),
            progress=bar("copying"),
        )
        for source_id in result.skipped:
            self.stdout.write(f"skipped {source_id}: already imported")
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {len(result.imported)} image(s), skipped {len(result.skipped)}"
            )
        )
