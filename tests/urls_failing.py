"""The site's URLs plus one view that fails, for the tests of what a server error logs."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from gamut_site.urls import handler403, handler404, handler500
from gamut_site.urls import urlpatterns as site_patterns

__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]


def failing(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a defect in a view")


urlpatterns = [*site_patterns, path("failing/", failing)]
