from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, re_path
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.analysis import api as analysis_api
from annotation.analysis import views as analysis_views
from annotation.home import views as home_views
from annotation.images import api as images_api
from annotation.images import views as images_views
from annotation.questions import views as questions_views
from annotation.review import api as review_api
from annotation.review import views as review_views
from annotation.training import api as training_api
from annotation.training import views as training_views
from core import views as core_views
from gamut_site import docs
from judging.checks import api as checks_api
from judging.checks import views as checks_views
from judging.leaderboard import api as leaderboard_api
from judging.leaderboard import views as leaderboard_views
from judging.releases import api as releases_api
from judging.releases import views as releases_views
from judging.runs import api as runs_api
from judging.runs import views as runs_views
from judging.spot_checks import api as spot_checks_api
from judging.spot_checks import views as spot_checks_views
from llm import api as llm_api
from llm import views as llm_views
from rubrics import api as rubrics_api
from rubrics import views as rubric_views

# Error pages with the menu, the view's own message and a way on (core/error_pages.py).
handler403 = "core.error_pages.forbidden"
handler404 = "core.http.not_found"
# core.http.server_error: a 503 when the database is not answering, JSON under /api/.
handler500 = "core.http.server_error"

urlpatterns = [
    path("", home_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Asked by nginx before it reads a large body (deploy/nginx.conf); open to anyone, it tells
    # a person only whether they may send it.
    path("upload-gate/", core_views.upload_gate, name="upload_gate"),
    path("review/", review_views.review_page, name="review"),
    path("review/<int:candidate_id>/", review_views.review_submit, name="review_submit"),
    path("review/<int:candidate_id>/skip/", review_views.review_skip, name="review_skip"),
    path("review/undo/", review_views.review_undo, name="review_undo"),
    path("review/mine/", review_views.review_mine, name="review_mine"),
    path("entities/", images_views.entity_page, name="entities"),
    path("entities/<int:image_id>/", images_views.entity_confirm, name="entity_confirm"),
    path("entities/<int:image_id>/skip/", images_views.entity_skip, name="entity_skip"),
    path("preferences/shortcuts/", home_views.preference_shortcuts, name="preference_shortcuts"),
    path("me/", home_views.my_work, name="my_work"),
    path("adjudicate/", review_views.adjudicate_page, name="adjudicate"),
    path(
        "adjudicate/<int:candidate_id>/", review_views.adjudicate_submit, name="adjudicate_submit"
    ),
    path("audit/", training_views.audit_page, name="audit"),
    path("audit/<int:audit_id>/", training_views.audit_submit, name="audit_submit"),
    path("rubrics/audit/", training_views.round_audit_page, name="round_audit"),
    path(
        "rubrics/audit/<int:audit_id>/",
        training_views.round_audit_submit,
        name="round_audit_submit",
    ),
    path("training/", training_views.training_page, name="training"),
    path("training/<int:user_id>/", training_views.training_change, name="training_change"),
    path("pipeline/", questions_views.pipeline, name="pipeline"),
    path("agreement/", analysis_views.agreement, name="agreement"),
    path("diversity/", analysis_views.diversity_page, name="diversity"),
    path("import/", images_views.import_page, name="import"),
    path("import/crag-mm/", images_views.import_crag_mm_page, name="import_crag_mm"),
    path("images/", images_views.image_list, name="images"),
    path("images/<str:source_id>/", images_views.image_page, name="image"),
    path("images/<str:source_id>/photo", images_views.image_file, name="image_file"),
    path(
        "questions/<int:question_id>/correct/",
        questions_views.question_correct,
        name="question_correct",
    ),
    path(
        "candidates/<int:candidate_id>/promote/",
        questions_views.candidate_promote,
        name="candidate_promote",
    ),
    path("rubrics/", rubric_views.queue, name="rubrics_queue"),
    path("export/", rubric_views.exports, name="exports"),
    path("export/<int:job_id>/file/", rubric_views.export_file, name="export_file"),
    path("rubrics/claim/", rubric_views.claim, name="rubrics_claim"),
    path("rubrics/checks/", checks_views.flagged_checks, name="flagged_checks"),
    path("rubrics/<int:rubric_id>/", rubric_views.history, name="rubric_history"),
    path("rubrics/versions/<int:version_id>/", rubric_views.workspace, name="rubric_workspace"),
    path(
        "rubrics/versions/<int:version_id>/checks/add/",
        rubric_views.check_add,
        name="rubric_check_add",
    ),
    path(
        "rubrics/versions/<int:version_id>/checks/<int:check_pk>/text/",
        rubric_views.check_text,
        name="rubric_check_text",
    ),
    path(
        "rubrics/versions/<int:version_id>/checks/<int:check_pk>/tier/",
        rubric_views.check_tier,
        name="rubric_check_tier",
    ),
    path(
        "rubrics/versions/<int:version_id>/checks/<int:check_pk>/delete/",
        rubric_views.check_delete,
        name="rubric_check_delete",
    ),
    path(
        "rubrics/versions/<int:version_id>/checks/<int:check_pk>/restore/",
        rubric_views.check_restore,
        name="rubric_check_restore",
    ),
    path(
        "rubrics/versions/<int:version_id>/checks/<int:check_pk>/move/",
        rubric_views.check_move,
        name="rubric_check_move",
    ),
    path(
        "rubrics/versions/<int:version_id>/complete/", rubric_views.complete, name="rubric_complete"
    ),
    path("jobs/", llm_views.job_list, name="jobs"),
    path("jobs/estimate/", llm_views.job_estimate, name="job_estimate"),
    path("jobs/launch/", llm_views.job_launch, name="job_launch"),
    path("jobs/<int:job_id>/", llm_views.job_detail, name="job"),
    path("jobs/<int:job_id>/cancel/", llm_views.job_cancel, name="job_cancel"),
    path("jobs/<int:job_id>/retry/", llm_views.job_retry, name="job_retry"),
    path("jobs/<int:job_id>/items/<int:item_id>/", llm_views.job_item, name="job_item"),
    path("prompts/", llm_views.prompt_list, name="prompts"),
    path("leaderboard/", leaderboard_views.leaderboard_page, name="leaderboard"),
    path("releases/", releases_views.releases_page, name="releases"),
    path("releases/cut/", releases_views.release_cut, name="release_cut"),
    path("releases/diff/", releases_views.release_diff_page, name="release_diff"),
    path("releases/<str:name>/", releases_views.release_page, name="release"),
    path("judging/runs/", runs_views.runs_page, name="judging_runs"),
    path("judging/runs/estimate/", runs_views.runs_estimate, name="judging_runs_estimate"),
    path("judging/runs/launch/", runs_views.runs_launch, name="judging_runs_launch"),
    path(
        "judging/runs/evaluate/estimate/",
        runs_views.evaluate_estimate_view,
        name="judging_evaluate_estimate",
    ),
    path(
        "judging/runs/evaluate/launch/",
        runs_views.evaluate_launch_view,
        name="judging_evaluate_launch",
    ),
    path(
        "judging/runs/evaluate/<int:job_id>/",
        runs_views.evaluation_page,
        name="judging_evaluation",
    ),
    path("judging/spot-checks/", spot_checks_views.grade_page, name="spot_checks"),
    path(
        "judging/spot-checks/<int:spot_check_id>/",
        spot_checks_views.grade_submit,
        name="spot_check_grade",
    ),
    path("judging/spot-checks/results/", spot_checks_views.results_page, name="spot_check_results"),
    path("judging/spot-checks/quality/", spot_checks_views.quality_page, name="judge_quality"),
    path("leaderboard/settings/", leaderboard_views.settings_page, name="results_settings"),
    path("leaderboard/judges/", leaderboard_views.judges_page, name="results_judges"),
    path("leaderboard/questions/", leaderboard_views.questions_page, name="results_questions"),
    path(
        "leaderboard/questions/<str:source_id>/",
        leaderboard_views.question_page,
        name="results_question",
    ),
    # API
    path("api/review/claim/", review_api.review_claim, name="api_review_claim"),
    path("api/entities/", images_api.proposal_list, name="api_entities"),
    path("api/entities/<int:image_id>/", images_api.proposal_confirm, name="api_entity_confirm"),
    path("api/candidates/<int:candidate_id>/", review_api.candidate_detail, name="api_candidate"),
    path(
        "api/candidates/<int:candidate_id>/reviews/",
        review_api.review_create,
        name="api_review_create",
    ),
    path("api/adjudication/claim/", review_api.adjudication_claim, name="api_adjudication_claim"),
    path(
        "api/candidates/<int:candidate_id>/adjudication/",
        review_api.adjudication_create,
        name="api_adjudication_create",
    ),
    path("api/images/import/", images_api.images_import, name="api_images_import"),
    path(
        "api/images/import/crag-mm/",
        images_api.import_crag_mm_api,
        name="api_images_import_crag_mm",
    ),
    path("api/images/<str:source_id>/", images_api.image_detail, name="api_image"),
    path("api/diversity/", analysis_api.diversity_detail, name="api_diversity"),
    # Training and audits (the pages /training/, /audit/, /rubrics/audit/).
    path("api/training/", training_api.training_list, name="api_training"),
    path("api/training/me/", training_api.training_me, name="api_training_me"),
    path("api/training/<int:user_id>/", training_api.training_change, name="api_training_change"),
    path("api/gold/import/", training_api.gold_import, name="api_gold_import"),
    path("api/audits/reviews/", training_api.review_audit_list, name="api_review_audits"),
    path(
        "api/audits/reviews/<int:audit_id>/",
        training_api.review_audit_give,
        name="api_review_audit",
    ),
    path("api/audits/rounds/", training_api.round_audit_list, name="api_round_audits"),
    path(
        "api/audits/rounds/<int:audit_id>/", training_api.round_audit_give, name="api_round_audit"
    ),
    path("api/benchmark/exports/", rubrics_api.benchmark_exports, name="api_benchmark_exports"),
    path(
        "api/benchmark/exports/<int:job_id>/",
        rubrics_api.benchmark_export,
        name="api_benchmark_export",
    ),
    path(
        "api/benchmark/exports/<int:job_id>/file/",
        rubrics_api.benchmark_export_file,
        name="api_benchmark_export_file",
    ),
    path("api/leaderboard/", leaderboard_api.leaderboard_detail, name="api_leaderboard"),
    path("api/releases/", releases_api.release_list, name="api_releases"),
    path("api/releases/diff/", releases_api.release_diff_detail, name="api_release_diff"),
    path("api/releases/<str:name>/", releases_api.release_detail, name="api_release"),
    path("api/checks/flagged/", checks_api.flagged_checks, name="api_flagged_checks"),
    path(
        "api/spot-checks/agreement/",
        spot_checks_api.spot_check_agreement,
        name="api_spot_check_agreement",
    ),
    path("api/spot-checks/audit/", spot_checks_api.audit_detail, name="api_audit"),
    path("api/spot-checks/quality/", spot_checks_api.quality_detail, name="api_judge_quality"),
    path("api/leaderboard/settings/", leaderboard_api.settings_detail, name="api_results_settings"),
    path("api/leaderboard/judges/", leaderboard_api.judges_detail, name="api_results_judges"),
    path(
        "api/leaderboard/questions/<str:source_id>/",
        leaderboard_api.question_detail,
        name="api_results_question",
    ),
    path("api/jobs/", llm_api.job_list, name="api_jobs"),
    path("api/jobs/stages/", llm_api.stage_list, name="api_job_stages"),
    path("api/jobs/estimate/", llm_api.job_estimate, name="api_job_estimate"),
    path("api/jobs/launch/", llm_api.job_launch, name="api_job_launch"),
    path("api/jobs/<int:job_id>/", llm_api.job_detail, name="api_job"),
    path("api/jobs/<int:job_id>/cancel/", llm_api.job_cancel, name="api_job_cancel"),
    path("api/jobs/<int:job_id>/retry/", llm_api.job_retry, name="api_job_retry"),
    path("api/judging/runs/estimate/", runs_api.run_estimate_view, name="api_judging_run_estimate"),
    path("api/judging/runs/launch/", runs_api.run_launch_view, name="api_judging_run_launch"),
    path(
        "api/judging/evaluate/estimate/",
        runs_api.evaluate_estimate_api,
        name="api_judging_evaluate_estimate",
    ),
    path(
        "api/judging/evaluate/launch/",
        runs_api.evaluate_launch_api,
        name="api_judging_evaluate_launch",
    ),
    path(
        "api/judging/evaluate/<int:job_id>/",
        runs_api.evaluation_api,
        name="api_judging_evaluation",
    ),
    # The rubric workspace's edits (the draft's revision is the optimistic lock).
    path("api/rubrics/claim/", rubrics_api.workspace_claim, name="api_rubric_claim"),
    path(
        "api/rubrics/versions/<int:version_id>/",
        rubrics_api.workspace_detail,
        name="api_rubric_version",
    ),
    path(
        "api/rubrics/versions/<int:version_id>/checks/",
        rubrics_api.workspace_check_add,
        name="api_rubric_check_add",
    ),
    path(
        "api/rubrics/versions/<int:version_id>/checks/<int:check_pk>/",
        rubrics_api.workspace_check_change,
        name="api_rubric_check",
    ),
    path(
        "api/rubrics/versions/<int:version_id>/checks/<int:check_pk>/restore/",
        rubrics_api.workspace_check_restore,
        name="api_rubric_check_restore",
    ),
    path(
        "api/rubrics/versions/<int:version_id>/checks/<int:check_pk>/move/",
        rubrics_api.workspace_check_move,
        name="api_rubric_check_move",
    ),
    path(
        "api/rubrics/versions/<int:version_id>/complete/",
        rubrics_api.workspace_complete,
        name="api_rubric_complete",
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI (served from the sidecar wheel) styles itself inline; its page alone allows that.
    # A page, not an API: DRF's OPTIONS answer (a dict) has no template to render it with, so
    # anything but GET gets the site's 405 page before DRF sees it.
    path(
        "api/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(
            require_safe(SpectacularSwaggerSplitView.as_view(url_name="schema"))
        ),
        name="api_docs",
    ),
    path("admin/", admin.site.urls),
    # The built documentation is served by whitenoise (gamut_site.docs); what it did not find
    # under /docs/ (a page the site lacks, or no site built) comes here for a page that says so.
    re_path(r"^docs/(?P<path>.*)$", docs.docs_missing, name="docs"),
]
