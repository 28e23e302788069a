"""The documentation (docs/*.md, built by mkdocs-material into settings.DOCS_ROOT) served at
/docs/, and the part of it that explains each page of the app.

- `StaticAndDocsMiddleware` is whitenoise's middleware serving the static files as before, and
  the built site under /docs/ as well (`WhiteNoise.add_files`, whitenoise's own way of adding a
  folder), so the docs cost the app what a static file does. The docs are public: they are the
  repository's own text, about the platform and nothing of its data, and a person at the login
  page may need them.
- `docs_missing` answers what whitenoise did not find under /docs/: no such page of a built
  site, or no build at all on this server (a clear page that says how to build it, never a 500).
- `HELP` maps each page's URL name to its place in the docs; `help_link` (a context processor)
  hands it to base.html's header and to the keys dialog. A test holds every page to an entry
  whose page and anchor exist in the built site (tests/test_docs.py).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from whitenoise.middleware import WhiteNoiseMiddleware

DOCS_URL = "/docs/"

# URL name -> "page.html#anchor" in the built site ("#anchor" for the docs' home, /docs/, the
# address whitenoise serves its index.html at). Pages that only take a form's submission map
# to the page that holds the form: a GET on them shows the 405 page, whose Help link this is.
HELP: dict[str, str] = {
    "home": "#people",
    "login": "#people",
    "logout": "#people",
    "upload_gate": "production.html#proxy",  # nginx asks it; a POST shows the 405 page
    "review": "annotators.html#review",
    "review_submit": "annotators.html#review",
    "review_skip": "annotators.html#review",
    "review_undo": "annotators.html#nothing-lost",
    "review_mine": "annotators.html#nothing-lost",
    "entities": "annotators.html#entities",
    "entity_confirm": "annotators.html#entities",
    "entity_skip": "annotators.html#entities",
    "preference_shortcuts": "annotators.html#nothing-lost",
    "my_work": "annotators.html#my-work",
    "adjudicate": "adjudicators.html#adjudicate",
    "adjudicate_submit": "adjudicators.html#adjudicate",
    "audit": "adjudicators.html#review-audits",
    "audit_submit": "adjudicators.html#review-audits",
    "round_audit": "revisers.html#round-audits",
    "round_audit_submit": "revisers.html#round-audits",
    "training": "training.html#training",
    "training_change": "training.html#training",
    "pipeline": "admins.html#pipeline",
    "agreement": "admins.html#agreement",
    "diversity": "admins.html#diversity",
    "import": "imports.html#web",
    "import_crag_mm": "imports.html#crag-mm",
    "images": "admins.html#images",
    "image": "admins.html#image",
    "image_file": "admins.html#image",
    "question_correct": "admins.html#corrections",
    "candidate_promote": "admins.html#pipeline",
    "exports": "rubric-files.html#export-page",
    "export_file": "rubric-files.html#export-page",
    "rubrics_queue": "revisers.html#rubrics",
    "rubrics_claim": "revisers.html#rubrics",
    "flagged_checks": "researchers.html#flagged-checks",
    "rubric_history": "revisers.html#round-1",
    "rubric_workspace": "revisers.html#workspace",
    "rubric_check_add": "revisers.html#workspace",
    "rubric_check_text": "revisers.html#workspace",
    "rubric_check_tier": "revisers.html#workspace",
    "rubric_check_delete": "revisers.html#workspace",
    "rubric_check_restore": "revisers.html#workspace",
    "rubric_check_move": "revisers.html#workspace",
    "rubric_complete": "revisers.html#workspace",
    "jobs": "llm-jobs.html#console",
    "job_estimate": "llm-jobs.html#console",
    "job_launch": "llm-jobs.html#console",
    "job": "llm-jobs.html#console",
    "job_cancel": "llm-jobs.html#console",
    "job_retry": "llm-jobs.html#console",
    "job_item": "llm-jobs.html#ledger",
    "prompts": "llm-stages.html#fencing",
    "leaderboard": "researchers.html#leaderboard",
    "releases": "releases.html",
    "release_cut": "releases.html#cut",
    "release": "releases.html#release",
    "release_diff": "releases.html#diff",
    "judging_runs": "judging.html#runs",
    "judging_runs_estimate": "judging.html#runs",
    "judging_runs_launch": "judging.html#runs",
    "judging_evaluate_estimate": "judging.html#evaluate",
    "judging_evaluate_launch": "judging.html#evaluate",
    "judging_evaluation": "judging.html#evaluate",
    "spot_checks": "judging.html#spot-checks",
    "spot_check_grade": "judging.html#spot-checks",
    "spot_check_results": "judging.html#audit",
    "judge_quality": "researchers.html#judges-against-people",
    "results_settings": "researchers.html#settings",
    "results_judges": "researchers.html#judges",
    "results_questions": "researchers.html#questions",
    "results_question": "researchers.html#questions",
}


def help_link(request: HttpRequest) -> dict[str, str]:
    """The docs' part for the page being drawn (the home of the docs for a page not mapped,
    such as a 404 on an address that names nothing)."""
    match = getattr(request, "resolver_match", None)
    return {"help_url": DOCS_URL + HELP.get(match.url_name if match else "", "")}


class StaticAndDocsMiddleware(WhiteNoiseMiddleware):
    """whitenoise's middleware, serving the built docs under /docs/ beside the static files."""

    def __init__(self, get_response=None, settings=settings) -> None:
        super().__init__(get_response, settings)
        self.docs_root = settings.DOCS_ROOT
        self.docs_read = False
        if self.autorefresh:
            # While developing, whitenoise looks at the folder on each request: a site built
            # after the server started (make docs beside make run) is served as it stands.
            self.add_files(self.docs_root, prefix=DOCS_URL)
            self.docs_read = True

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Otherwise the built site is read once, on the first request for it rather than as the
        # process starts: reading it costs whitenoise about 0.5 ms a file (the site has about
        # 70), which a process, or a test's client, that serves no page of the docs never pays.
        if (
            not self.docs_read
            and request.path_info.startswith(DOCS_URL)
            and self.docs_root.is_dir()
        ):
            self.add_files(self.docs_root, prefix=DOCS_URL)
            self.docs_read = True
        return super().__call__(request)


@require_safe
def docs_missing(request: HttpRequest, path: str = "") -> HttpResponse:
    built = (settings.DOCS_ROOT / "index.html").is_file()
    return render(
        request,
        "docs_missing.html",
        {"built": built, "way_on": DOCS_URL if built else "/"},
        status=404 if built else 503,
    )
