"""recheck_images: every stored photo's bytes checked again, for rows imported before the import
stored files by their decoded format."""

from pathlib import PurePosixPath

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.images.importing import CONTENT_TYPES, IMAGE_FORMATS, image_format
from annotation.models import AuditEvent, Image

QUARANTINE = "quarantine"


class Command(BaseCommand):
    help = (
        "Check every stored photo's bytes with Pillow. A JPEG, PNG, WebP or GIF file stored "
        "under another extension (say photo.html) is renamed to its format's extension; a file "
        "that is none of these, or over the image caps (IMAGE_MAX_PIXELS, _SIDE, _FRAMES, "
        "_METADATA_BYTES), is moved to quarantine/ under "
        "MEDIA_ROOT with '.quarantined' added, and is no longer served (its page shows no "
        "photo). A missing file is reported and left. Each change is written to the audit log. "
        "Safe to run again: a sound file is left alone. Exit status 0."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="report what would change, change nothing"
        )

    def handle(self, *args, dry_run: bool, **options):
        counts = {"sound": 0, "renamed": 0, "quarantined": 0, "kept": 0, "missing": 0}
        for image in Image.objects.order_by("pk").iterator():
            outcome = self._recheck(image, dry_run=dry_run)
            counts[outcome] += 1
        verb = "would be " if dry_run else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"{counts['sound']} sound, {counts['renamed']} {verb}renamed, "
                f"{counts['quarantined']} {verb}quarantined, {counts['kept']} in quarantine "
                f"already, {counts['missing']} missing"
            )
        )

    def _recheck(self, image: Image, *, dry_run: bool) -> str:
        name = image.file.name
        if name.startswith(f"{QUARANTINE}/"):
            return "kept"
        try:
            with default_storage.open(name, "rb") as handle:
                found, problem = image_format(handle, PurePosixPath(name).name)
        except FileNotFoundError:
            self.stderr.write(f"{image.source_id}: file {name} is missing")
            return "missing"
        suffix = PurePosixPath(name).suffix.lower()
        if problem is None and CONTENT_TYPES.get(suffix) == CONTENT_TYPES[IMAGE_FORMATS[found]]:
            return "sound"
        if problem is None:
            target = str(PurePosixPath(name).with_suffix(IMAGE_FORMATS[found]))
            outcome, why = "renamed", f"its bytes are {found}"
        else:
            target = f"{QUARANTINE}/{PurePosixPath(name).name}.quarantined"
            outcome, why = "quarantined", problem
        if dry_run:
            self.stdout.write(f"{image.source_id}: {name} would be {outcome} ({why})")
            return outcome
        with default_storage.open(name, "rb") as handle:
            stored = default_storage.save(target, handle)
        with transaction.atomic():
            Image.objects.filter(pk=image.pk).update(file=stored)
            AuditEvent.objects.create(
                action=f"images.{outcome}",
                image=image,
                data={"from": name, "to": stored, "why": why},
            )
        default_storage.delete(name)
        self.stdout.write(f"{image.source_id}: {name} {outcome} to {stored} ({why})")
        return outcome
