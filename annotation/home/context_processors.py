from django.urls import reverse

from core import access

# The menu: (label, url name, the url names of the pages it covers, who sees it). The entry
# whose pages hold the current one is marked with aria-current, so a person sees where they are.
MENU = (
    ("Review", "review", {"review", "review_submit"}, "is_annotator"),
    ("My work", "my_work", {"my_work"}, "is_annotator"),
    ("Adjudicate", "adjudicate", {"adjudicate", "adjudicate_submit"}, "is_adjudicator"),
    ("Audit", "audit", {"audit", "audit_submit"}, "is_adjudicator"),
    (
        "Rubrics",
        "rubrics_queue",
        {"rubrics_queue", "rubric_history", "rubric_workspace"},
        "is_rubric_reviser",
    ),
    ("Audit rounds", "round_audit", {"round_audit", "round_audit_submit"}, "is_rubric_reviser"),
    (
        "Spot checks",
        "spot_checks",
        {"spot_checks", "spot_check_grade", "spot_check_results"},
        "is_reviser_or_admin",
    ),
    ("Pipeline", "pipeline", {"pipeline"}, "is_admin"),
    ("Images", "images", {"images", "image"}, "is_admin"),
    ("Jobs", "jobs", {"jobs", "job", "job_item", "prompts"}, "is_admin"),
    ("Agreement", "agreement", {"agreement"}, "is_admin"),
    ("Training", "training", {"training"}, "is_admin"),
    ("Judging", "judging_runs", {"judging_runs"}, "is_admin"),
    (
        "Leaderboard",
        "leaderboard",
        {
            "leaderboard",
            "results_settings",
            "results_judges",
            "results_questions",
            "results_question",
        },
        "is_admin",
    ),
    ("Import", "import", {"import"}, "is_admin"),
    ("Export", "exports", {"exports"}, "is_admin"),
    ("API", "api_docs", {"api_docs"}, "is_admin"),
)


def roles(request) -> dict:
    user_roles = access.roles(request.user)
    flags = {
        "is_annotator": access.ANNOTATOR in user_roles,
        "is_adjudicator": access.ADJUDICATOR in user_roles,
        "is_rubric_reviser": access.RUBRIC_REVISER in user_roles,
        "is_admin": "admin" in user_roles,
    }
    flags["is_reviser_or_admin"] = flags["is_rubric_reviser"] or flags["is_admin"]
    match = getattr(request, "resolver_match", None)
    current = match.url_name if match else None
    menu = [
        {"label": label, "url": reverse(name), "current": current in pages}
        for label, name, pages, who in MENU
        if flags[who]
    ]
    return {"roles": user_roles, **flags, "menu": menu}
