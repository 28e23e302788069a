import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
application = get_wsgi_application()

# Load the URLconf (and every view module with it) now, then freeze everything loaded so far:
# the collector's full passes then scan only what requests allocate. Without this a full pass
# over Django and its libraries took 100-300 ms in each worker, every few dozen requests
# (bench/README.md, rubric workspace).
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018
gc.freeze()
