"""Demo data: a few real photographs shipped in the scikit-image wheel, with entities and
candidate questions written for the demo, and one user per role. Everything it makes is
labelled as demo data. Running it twice changes nothing."""

import importlib.util
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from annotation.demo import DEMO_IMAGES, DEMO_PASSWORD_SUFFIX, DEMO_USERS
from annotation.importing import ManifestEntry, images_import
from annotation.models import ImportBatch
from core.access import ROLE_GROUPS

DEMO_AUDIT_RATE = 0.5


def skimage_data_dir() -> Path:
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise CommandError("scikit-image is not installed; it ships the demo photographs")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


class Command(BaseCommand):
    help = "Load demo users and demo images (labelled as demo data). Idempotent."

    def add_arguments(self, parser):
        parser.add_argument(
            "--allow-production",
            action="store_true",
            help="load demo users even with GAMUT_ENV=production",
        )

    def handle(self, *args, allow_production: bool, **options):
        if settings.PRODUCTION and not allow_production:
            raise CommandError(
                "refusing to create demo users in production "
                "(pass --allow-production if you really mean it)"
            )
        for name in ROLE_GROUPS:
            Group.objects.get_or_create(name=name)
        created_users = []
        for username, groups, staff in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={
                    "is_staff": staff,
                    "is_superuser": staff,
                    "first_name": username.title(),
                    "last_name": "(demo)",
                },
            )
            if created:
                user.set_password(username + DEMO_PASSWORD_SUFFIX)
                user.save(update_fields=["password"])
                user.groups.set(Group.objects.filter(name__in=groups))
                created_users.append(username)
        data = skimage_data_dir()
        entries = [
            ManifestEntry(
                line=n,
                source_id=source_id,
                image_path=data / file_name,
                entity=entity,
                domain=domain,
                popularity=popularity,
                egocentric=False,
                candidates=questions,
            )
            for n, (file_name, source_id, entity, domain, popularity, questions) in enumerate(
                DEMO_IMAGES, start=1
            )
        ]
        missing = [str(e.image_path) for e in entries if not e.image_path.is_file()]
        if missing:
            raise CommandError(f"demo photographs missing from scikit-image: {', '.join(missing)}")
        result = images_import(
            entries,
            actor=None,
            source=ImportBatch.Source.DEMO,
            file_name="demo (scikit-image photographs)",
            demo=True,
        )
        rubric = self._demo_rubric()
        judged = self._demo_judging()
        from judging.demo import demo_release

        released = demo_release()
        staged = self._demo_stages()
        drawn = self._demo_audits()
        from llm.demo import demo_llm_models

        llm_models = demo_llm_models()
        self.stdout.write(
            f"demo data: {len(created_users)} user(s) and {len(result.imported)} image(s) "
            f"created, {len(result.skipped)} image(s) already there"
            + ("; a demo rubric created" if rubric else "")
            + ("; demo answers and verdicts created" if judged else "")
            + (f"; demo release {released} cut" if released else "")
            + (f"; demo reviews for the pipeline ({', '.join(staged)})" if staged else "")
            + (f"; {drawn} demo review(s) drawn for audit" if drawn else "")
            + (f"; demo LLM models ({', '.join(llm_models)})" if llm_models else "")
        )

    def _demo_rubric(self) -> bool:
        """One demo question with a demo meta-rubric waiting for a human round, made through the
        same services as real work (two acceptances, a promotion, a rubric version)."""
        from annotation import services
        from annotation.models import Candidate, FinalQuestion
        from rubrics.demo import DEMO_META_RUBRIC, DEMO_QUESTION, DEMO_SOURCE_ID
        from rubrics.models import Stage
        from rubrics.services import rubric_version_create

        if FinalQuestion.objects.filter(image__source_id=DEMO_SOURCE_ID).exists():
            return False
        candidate = Candidate.objects.get(image__source_id=DEMO_SOURCE_ID, text=DEMO_QUESTION)
        if candidate.status != "open" or candidate.reviews.exists():
            self.stdout.write(
                "demo rubric skipped: the demo cappuccino question has been "
                "reviewed by hand already"
            )
            return False
        erin, bob, admin = (User.objects.get(username=name) for name in ("erin", "bob", "admin"))
        for annotator in (erin, bob):
            services.review_submit(
                user=annotator, candidate_id=candidate.pk, decision="accept", comment="demo review"
            )
        question = services.final_question_promote(user=admin, candidate_id=candidate.pk)
        rubric_version_create(
            question=question,
            meta_document=DEMO_META_RUBRIC,
            stage=Stage.LLM_REFINED_1,
            made_by_model="demo data",
        )
        return True

    def _demo_judging(self) -> bool:
        """Demo answers of two demo models in both settings, graded by two demo judges on the
        demo question's rubric (written for the demo, no LLM called), so that the leaderboard,
        the result pages and the spot checks have something to show. Every name says demo."""
        from judging.demo import demo_judging

        return demo_judging()

    def _demo_audits(self) -> int:
        """Half of each annotator's resolved demo reviews drawn for audit (the team's rate, 5 %,
        draws none of so few), so that carol has reviews to audit on /audit/ and over the API.
        The draw is exact per person: running it again draws nothing more."""
        from annotation.audits import review_audits_draw

        return review_audits_draw(rate=DEMO_AUDIT_RATE)

    def _demo_stages(self) -> list[str]:
        """Demo reviews that leave something for each LLM stage to take after `make run`: the
        rocket's first question accepted by two annotators (the guard's), the Hubble photo's
        questions all discarded (generation's). Skipped where anyone reviewed already."""
        from annotation import services
        from annotation.demo import DEMO_AWAITING_GUARD, DEMO_NEEDING_CANDIDATES
        from annotation.models import Candidate

        done = []
        plans = [
            (DEMO_AWAITING_GUARD, "accept", ("alice", "erin"), 1),
            (DEMO_NEEDING_CANDIDATES, "discard", ("alice", "bob"), None),
        ]
        for source_id, decision, names, how_many in plans:
            candidates = list(
                Candidate.objects.filter(
                    image__source_id=source_id, image__question__isnull=True
                ).order_by("pk")
            )
            if not candidates or any(c.reviews.exists() for c in candidates):
                continue
            for candidate in candidates[:how_many]:
                for name in names:
                    services.review_submit(
                        user=User.objects.get(username=name),
                        candidate_id=candidate.pk,
                        decision=decision,
                        comment="demo review",
                    )
            done.append(source_id)
        return done
