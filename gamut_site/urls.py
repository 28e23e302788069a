from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.RateLimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("review/", views.review_page, name="review"),
    path("review/<int:candidate_id>/", views.review_submit, name="review_submit"),
    path("adjudicate/", views.adjudicate_page, name="adjudicate"),
    path("adjudicate/<int:candidate_id>/", views.adjudicate_submit, name="adjudicate_submit"),
    path("pipeline/", views.pipeline, name="pipeline"),
    path("agreement/", views.agreement, name="agreement"),
    path("import/", views.import_page, name="import"),
    path("images/<str:source_id>/", views.image_page, name="image"),
    path("images/<str:source_id>/photo", views.image_file, name="image_file"),
    path("candidates/<int:candidate_id>/promote/", views.candidate_promote,
         name="candidate_promote"),
    # API
    path("api/review/claim/", api.review_claim, name="api_review_claim"),
    path("api/candidates/<int:candidate_id>/", api.candidate_detail, name="api_candidate"),
    path("api/candidates/<int:candidate_id>/reviews/", api.review_create,
         name="api_review_create"),
    path("api/adjudication/claim/", api.adjudication_claim, name="api_adjudication_claim"),
    path("api/candidates/<int:candidate_id>/adjudication/", api.adjudication_create,
         name="api_adjudication_create"),
    path("api/images/import/", api.images_import, name="api_images_import"),
    path("api/images/<str:source_id>/", api.image_detail, name="api_image"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI (served from the sidecar wheel) styles itself inline; its page alone allows that.
    path("api/docs/", csp_update({"style-src": ["'unsafe-inline'"]})(
        SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api_docs"),
    path("admin/", admin.site.urls),
]
