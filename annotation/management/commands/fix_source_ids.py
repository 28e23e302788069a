"""fix_source_ids: images imported before the import checked source ids, given safe ones."""

import re
import sys
import unicodedata

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, transaction

from annotation.models import AuditEvent, Image
from core.errors import InvalidInput
from core.text import SOURCE_ID_MAX, clean_source_id

_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.:-]+")


def unsafe(source_id: str) -> str | None:
    """Why clean_source_id refuses the id, or None when it is safe."""
    try:
        clean_source_id(source_id)
    except InvalidInput as exc:
        return exc.message
    return None


def proposal(source_id: str, pk: int) -> str:
    """A safe id close to the old one: accents dropped (é -> e), every run of other characters
    turned into one '-', ends trimmed, at most SOURCE_ID_MAX characters; `image-<pk>` when
    nothing of it is left."""
    ascii_text = unicodedata.normalize("NFKD", source_id).encode("ascii", "ignore").decode()
    safe = _UNSAFE_RUN.sub("-", ascii_text).strip("-.")
    # Room for the "-<pk>" a clash adds.
    safe = safe[: SOURCE_ID_MAX - 12].rstrip("-.")
    return safe or f"image-{pk}"


class Command(BaseCommand):
    help = (
        "Give a safe source id (letters, digits and - _ . :, at most 200 characters, as the "
        "imports require) to every image whose source id is not one: such an image's pages and "
        "API answers cannot be addressed. The new id drops accents and turns each run of other "
        "characters into '-' ('a/b c' -> 'a-b-c'); when that id is taken, '-<image pk>' is "
        "added. --rename OLD NEW chooses the new id of one image instead. Each change is one "
        "transaction with an audit event (images.source_id_fixed, old and new id). Running it "
        "again changes nothing. Exit status 0 when every unsafe id was fixed (or, with "
        "--dry-run, could be), 1 when some could not be (each is reported with the reason)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="list the unsafe ids and their new ids only"
        )
        parser.add_argument(
            "--rename",
            nargs=2,
            action="append",
            default=[],
            metavar=("OLD", "NEW"),
            help="the new id of the image whose id is OLD (repeatable)",
        )

    def handle(self, *args, dry_run: bool, rename: list[list[str]], **options):
        chosen = dict(rename)
        rows = [
            (pk, source_id, why)
            for pk, source_id in Image.objects.order_by("pk").values_list("pk", "source_id")
            if (why := unsafe(source_id)) is not None
        ]
        strays = sorted(set(chosen) - {source_id for _, source_id, _ in rows})
        for old in strays:
            if Image.objects.filter(source_id=old).exists():
                self.stderr.write(f"{old!r}: its source id is safe already; --rename ignored")
            else:
                raise CommandError(f"--rename {old!r}: no image has that source id")
        taken = set(Image.objects.values_list("source_id", flat=True))
        failed = fixed = 0
        for pk, old, why in rows:
            new, problem = self._new_id(pk, old, chosen.get(old), taken)
            if problem is not None:
                self.stderr.write(f"{old!r} (image {pk}): cannot fix: {problem}")
                failed += 1
                continue
            assert new is not None
            if dry_run:
                self.stdout.write(f"{old!r} -> {new!r} ({why})")
                taken.add(new)
                fixed += 1
                continue
            problem = self._apply(pk, old, new)
            if problem is not None:
                self.stderr.write(f"{old!r} (image {pk}): cannot fix: {problem}")
                failed += 1
                continue
            taken.add(new)
            fixed += 1
            self.stdout.write(f"{old!r} -> {new!r}")
        verb = "would be fixed" if dry_run else "fixed"
        self.stdout.write(
            self.style.SUCCESS(
                f"{len(rows)} unsafe source id(s): {fixed} {verb}, {failed} could not be"
            )
        )
        if failed:
            sys.exit(1)

    @staticmethod
    def _new_id(
        pk: int, old: str, wanted: str | None, taken: set[str]
    ) -> tuple[str | None, str | None]:
        """(the new id, None) or (None, why there is none)."""
        if wanted is not None:
            why = unsafe(wanted)
            if why is not None:
                return None, f"the id given is not safe either: {why}"
            if wanted in taken:
                return None, f"{wanted!r} is another image's source id"
            return wanted, None
        new = proposal(old, pk)
        if new in taken:
            new = f"{new}-{pk}"
        if new in taken:
            return None, f"{new!r} is taken too; choose one with --rename {old!r} NEW"
        return new, None

    @staticmethod
    def _apply(pk: int, old: str, new: str) -> str | None:
        """Rename, unless the row changed since it was read; the reason when not."""
        try:
            with transaction.atomic():
                # Conditional: an image renamed or removed meanwhile is left as it is.
                changed = Image.objects.filter(pk=pk, source_id=old).update(source_id=new)
                if changed != 1:
                    return "the image changed while the command ran; run it again"
                AuditEvent.objects.create(
                    action="images.source_id_fixed",
                    image_id=pk,
                    data={"from": old, "to": new},
                )
        except IntegrityError:
            return f"{new!r} was taken while the command ran; run it again"
        return None
