"""Settings for the GAMUT platform: one file, driven by environment variables.

Development (the default) needs nothing set: SQLite under var/, Redis on 127.0.0.1:6379.
Production sets GAMUT_ENV=production and must give SECRET_KEY, ALLOWED_HOSTS,
DATABASE_URL and REDIS_URL; a missing one stops the process at start-up.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gamut_site.proxies import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str | None = None) -> str | None:
    """A setting from the environment, or from the file named by NAME_FILE (Docker secrets)."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        return Path(file_name).read_text().strip()
    return os.environ.get(name, default)


def envbool(name: str, default: str = "False") -> bool:
    return (env(name, default) or "").strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    return int(env(name, str(default)) or default)


def envlist(name: str, default: str = "") -> list[str]:
    return [part.strip() for part in (env(name, default) or "").split(",") if part.strip()]


PRODUCTION = env("GAMUT_ENV", "development") == "production"
DEBUG = envbool("DEBUG", "False" if PRODUCTION else "True")


def required(name: str) -> str:
    value = env(name)
    if not value:
        raise ImproperlyConfigured(
            f"{name} must be set in the environment when GAMUT_ENV=production"
        )
    return value


if PRODUCTION:
    SECRET_KEY = required("SECRET_KEY")
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters of varied text")
    ALLOWED_HOSTS = envlist("ALLOWED_HOSTS") or [required("ALLOWED_HOSTS")]
    required("DATABASE_URL")
    required("REDIS_URL")
else:
    SECRET_KEY = env("SECRET_KEY") or "django-insecure-development-only-never-in-production"
    ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

VAR_DIR = Path(env("GAMUT_VAR_DIR", str(BASE_DIR / "var")) or BASE_DIR / "var")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "csp",
    "axes",
    "core",
    "annotation",
    "rubrics",
    "llm",
    "judging",
]

MIDDLEWARE = [
    # Outermost: it sees every response, to tell gunicorn's access log the client and the user.
    "gamut_site.logs.access_log_middleware",
    # Then: the forwarded headers of anyone but our proxies are gone before anything reads them.
    "gamut_site.proxies.forwarded_headers_middleware",
    "django.middleware.security.SecurityMiddleware",
    # whitenoise: the static files, and the built documentation at /docs/.
    "gamut_site.docs.StaticAndDocsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before anything reads the body: a large one from anyone who may not upload is refused
    # by its Content-Length, unread (after the session: it asks who is sending).
    "core.middleware.RequestSizeMiddleware",
    # Before CSRF and every view: no control character or runaway value gets further.
    "core.middleware.InputBoundaryMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Under DEBUG only: a 404 is the site's own page, not Django's list of every address
    # (inside CSP, so that page keeps its headers).
    "core.middleware.DebugNotFoundMiddleware",
    "core.http.DomainErrorMiddleware",
    # After HtmxMiddleware, so that it leaves the 405s of htmx requests to htmx.
    "core.error_pages.MethodNotAllowedPage",
    # Last, as axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "gamut_site.urls"
CSRF_FAILURE_VIEW = "core.error_pages.csrf_failure"  # a page a person can read, with the menu
WSGI_APPLICATION = "gamut_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The site's own templates, then each capability package's (judging/leaderboard/templates,
        # ...): a package keeps its pages beside its views.
        "DIRS": [BASE_DIR / "templates", *sorted(BASE_DIR.glob("*/*/templates"))],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotation.home.context_processors.roles",
                "gamut_site.docs.help_link",
                "core.context_processors.limits",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    },
]

# Database: SQLite by default (WAL, IMMEDIATE transactions, a busy timeout), DATABASE_URL selects.
DATABASE_URL = env("DATABASE_URL")
if DATABASE_URL:
    # Health checks: a connection kept from before a database restart is tested before a
    # request uses it (and reopened), instead of failing that request.
    DATABASES = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "gamut.sqlite3"),
        }
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
            ),
        }
    )
    # Tests that start other processes (a Celery worker, racing annotators) need a file,
    # not SQLite's default in-memory test database.
    # One file per test run, so that two runs side by side don't share it.
    DATABASES["default"]["TEST"] = {
        "NAME": env("GAMUT_SQLITE_TEST_NAME", str(VAR_DIR / f"test-{os.getpid()}.sqlite3"))
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0") or ""
REDIS_CACHE = bool(env("REDIS_URL")) or PRODUCTION  # the cache (and the sessions) in Redis
if REDIS_CACHE:
    # django-redis, for its IGNORE_EXCEPTIONS: with Redis down, a read of the cache is a miss
    # and a write is skipped (each logged), so pages and logins go on from the database, as the
    # sessions are kept there too. Django's own Redis backend raises, which would answer every
    # page with a 500 and refuse every login until Redis is back.
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "IGNORE_EXCEPTIONS": True,
                "SOCKET_CONNECT_TIMEOUT": 1,  # seconds: an unreachable Redis costs at most this
                "SOCKET_TIMEOUT": 1,
            },
        }
    }
    DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# The TLS proxies in front of the web server: addresses or networks. Only a request from one of
# them may say who the client is (X-Forwarded-For) and that it came over HTTPS
# (X-Forwarded-Proto); from anyone else those headers are dropped (gamut_site/proxies.py).
TRUSTED_PROXIES = envlist("TRUSTED_PROXIES", "127.0.0.1,::1")
parse_networks(TRUSTED_PROXIES)  # a typo stops the start-up, rather than trusting nobody

# Failed logins, on our login page and the admin's (django-axes). The count is per (user name,
# client address) pair, so a stranger's guesses lock out only that stranger's pair, never a
# colleague behind the same proxy. LOGIN_RATE_LIMIT failures within LOGIN_RATE_WINDOW seconds
# lock the pair until LOGIN_RATE_WINDOW seconds after the last of them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked pair before any password
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("LOGIN_RATE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(seconds=envint("LOGIN_RATE_WINDOW", 900))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "gamut_site.proxies.client_ip"
AXES_USERNAME_CALLABLE = "annotation.home.login.login_username"
AXES_LOCKOUT_CALLABLE = "annotation.home.login.login_locked_out"
AXES_RESET_ON_SUCCESS = True
# Attempts during a lock are refused but not counted, so the time the lockout page gives holds.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", str(VAR_DIR / "static")) or "")
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing one
# The documentation site that mkdocs builds from docs/ (mkdocs.yml's site_dir), served at /docs/
# by gamut_site.docs; /docs/ is also where whitenoise serves the folder's index.html.
DOCS_ROOT = BASE_DIR / "site"
WHITENOISE_INDEX_FILE = True
MEDIA_ROOT = Path(env("MEDIA_ROOT", str(VAR_DIR / "media")) or "")
# Uploaded photos are served by a view that checks who is asking, never as public files.
MEDIA_URL = "/media-not-public/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# The largest body any address takes (core.middleware.RequestSizeMiddleware refuses a larger
# one unread); the import and gold upload addresses take their caps below, from admins only.
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Review rules.
REVIEW_LEASE = timedelta(seconds=envint("REVIEW_LEASE_SECONDS", 30 * 60))

# Imports: caps on what one import may make the server read or unpack (docs/imports.md).
# An upload names its members in the manifest; only those are unpacked, one at a time.
IMPORT_MAX_FILE_BYTES = envint("IMPORT_MAX_FILE_BYTES", 20 * 1024 * 1024)  # one image
IMPORT_MAX_TOTAL_BYTES = envint("IMPORT_MAX_TOTAL_BYTES", 2 * 1024 * 1024 * 1024)  # one import
IMPORT_MAX_MEMBERS = envint("IMPORT_MAX_MEMBERS", 20_000)  # entries in one zip
# The manifest (and the CRAG-MM entities file) an upload may carry: read whole into memory, so
# capped before a byte of it is read. 100,000 lines of a few hundred bytes fit.
IMPORT_MAX_MANIFEST_BYTES = envint("IMPORT_MAX_MANIFEST_BYTES", 64 * 1024 * 1024)
# What an image may make a browser or a model decode, read from its header before a pixel is:
# width x height x frames (Pillow's MAX_IMAGE_PIXELS is set from it at start-up, so a small
# file that decodes to gigabytes never does), the longer side, the frames of an animation, and
# the metadata it carries (ICC profile, EXIF, XMP, text). 50 million pixels is the largest
# phone camera's photo.
IMAGE_MAX_PIXELS = envint("IMAGE_MAX_PIXELS", 50_000_000)
IMAGE_MAX_SIDE = envint("IMAGE_MAX_SIDE", 12_000)
IMAGE_MAX_FRAMES = envint("IMAGE_MAX_FRAMES", 100)
IMAGE_MAX_METADATA_BYTES = envint("IMAGE_MAX_METADATA_BYTES", 1024 * 1024)

# Security.
# Sessions live in the database; with Redis, every request reads them from the cache first
# (Django's cached_db: a cache miss, or a Redis restart, falls back to the database).
SESSION_ENGINE = (
    "django.contrib.sessions.backends.cached_db"
    if REDIS_CACHE
    else "django.contrib.sessions.backends.db"
)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the body's hx-headers, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "True")
    # Believed only from TRUSTED_PROXIES: gamut_site.proxies drops the header from anyone else.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated script gets 401 with a WWW-Authenticate header.
        "core.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "EXCEPTION_HANDLER": "core.http.api_exception_handler",
}
# API tokens (django-rest-knox): only a hash of each is stored (SHA-512), so a copy of the
# database opens no account. `manage.py api_token USERNAME` makes one and shows it once; it
# lasts API_TOKEN_DAYS (0: until revoked). A token starts with "gamut_", so a leaked one is
# recognisable.
API_TOKEN_DAYS = envint("API_TOKEN_DAYS", 90)
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=API_TOKEN_DAYS) if API_TOKEN_DAYS > 0 else None,
    "TOKEN_PREFIX": "gamut_",
    "AUTO_REFRESH": False,  # a request never writes: the expiry is fixed when it is made
    "AUTH_HEADER_PREFIX": "Token",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GAMUT review platform API",
    "DESCRIPTION": (
        "Question review for the GAMUT benchmark. Authenticate with a session (log in at /login/) "
        "or with `Authorization: Token <token>`. An admin makes a token with `python manage.py "
        "api_token USERNAME` (or in /admin/ -> Auth tokens -> Add); it is shown once, only its "
        "hash is kept, and it lasts API_TOKEN_DAYS days (90 by default). `python manage.py "
        "api_token USERNAME --revoke` ends every token of that person."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Two verdict choice sets share a field name: each audit's named apart.
    "ENUM_NAME_OVERRIDES": {
        "ReviewVerdictEnum": ["agree", "overturn"],
        "RoundVerdictEnum": ["accept", "flag"],
        "CandidateStatusEnum": ["open", "disputed", "accepted", "discarded", "revised"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.schema.document_errors",
    ],
    # The schema and its docs are for people with a role, as the API itself.
    "SERVE_PERMISSIONS": ["core.access.IsMember"],
    # Swagger UI from the drf-spectacular-sidecar wheel: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: the database is the source of truth, messages carry ids only.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 1800)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", 3600),
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that loses the broker (a Redis restart) keeps running its chunk: the chunk's work is
# leased and recorded in the database, and cancelling it would make its calls again. Celery 6
# turns this on by default; said here so that it stays off.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_SERIALIZER = "json"
# How often beat runs the LLM jobs' sweep (llm/jobs.py jobs_sweep): it sends chunks to a job
# that runs fewer than its pace (a killed worker's, within about 10 s of the kill plus this),
# and hands a killed worker's own items out again within lease + this (70 s by default),
# without waiting for kombu to restore the dead worker's unacknowledged message.
LLM_JOB_SWEEP_SECONDS = envint("LLM_JOB_SWEEP_SECONDS", 10)
CELERY_BEAT_SCHEDULE = {
    "review-claims-sweep": {"task": "annotation.tasks.review_claims_sweep", "schedule": 300.0},
    "llm-jobs-sweep": {
        "task": "llm.tasks.sweep_expired_leases",
        "schedule": float(LLM_JOB_SWEEP_SECONDS),
    },
}

# The web, the worker and beat log alike (gamut_site/celery.py hands Celery this too): time,
# level, logger, then who asked for a request's lines (a 500 names its user) or the job of a
# worker's task (gamut_site/logs.py). The access log is gunicorn's (deploy/gunicorn.conf.py).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "gamut_site.logs.LogContext"}},
    "formatters": {
        "line": {"format": "%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s"}
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["context"], "formatter": "line"}
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # One INFO line for every model call (thousands a minute in a job): the ledger has them.
        "httpx": {"level": "WARNING"},
    },
}

# LLM gateway (llm/gateway.py). Keys and addresses come from the environment; the base URLs are
# optional (proxies, local OpenAI-compatible servers, the fake servers of the tests).
GEMINI_API_KEY = env("GEMINI_API_KEY", "") or ""
GEMINI_BASE_URL = env("GEMINI_BASE_URL") or None
OPENAI_API_KEY = env("OPENAI_API_KEY", "") or ""
OPENAI_BASE_URL = env("OPENAI_BASE_URL") or None
LLM_TIMEOUT_SECONDS = envint("LLM_TIMEOUT_SECONDS", 120)
# Attempts of one request through 5xx and timeouts (backoff with jitter between them).
LLM_MAX_ATTEMPTS = envint("LLM_MAX_ATTEMPTS", 5)
LLM_BACKOFF_BASE_MS = envint("LLM_BACKOFF_BASE_MS", 1000)
LLM_BACKOFF_CAP_SECONDS = envint("LLM_BACKOFF_CAP_SECONDS", 60)
# Per-minute 429s are waited out (the server's retry delay, capped) this many times at most.
LLM_MAX_RATE_LIMIT_WAITS = envint("LLM_MAX_RATE_LIMIT_WAITS", 10)
LLM_RETRY_DELAY_CAP_SECONDS = envint("LLM_RETRY_DELAY_CAP_SECONDS", 120)
# Repair turns of one structured call: an answer that fails its schema or the stage's own rules
# (the rubric compiler, the guard's ids) goes back with its problems this many times at most.
LLM_MAX_REPAIRS = envint("LLM_MAX_REPAIRS", 2)

# LLM jobs (llm/jobs.py). A short lease, renewed every third of it by the running chunk's
# heartbeat: a live chunk keeps its items however long they take, a killed worker's items are
# free again a lease after its last beat (the sweep then requeues them).
LLM_JOB_LEASE_SECONDS = envint("LLM_JOB_LEASE_SECONDS", 60)
# Claims of one item (a worker that dies on it counts as one); then it fails with its reason.
LLM_JOB_MAX_ATTEMPTS = envint("LLM_JOB_MAX_ATTEMPTS", 3)
# Chunk tasks of one job at once while its model's limits are unknown or absent (each sends
# its successor while items remain); a model with a per-minute limit sets its own (Pace).
LLM_JOB_PARALLEL_CHUNKS = envint("LLM_JOB_PARALLEL_CHUNKS", 4)
# The calls a second one chunk (one worker process) carries of a limited model's quota: a quota
# of 3,000 a minute (50 a second) runs in 2 chunks. A process spends about 3-4 ms of CPU a call
# (bench/llm_throughput.py), so 25 a second is a tenth of a core.
LLM_JOB_CHUNK_CALLS_PER_SECOND = envint("LLM_JOB_CHUNK_CALLS_PER_SECOND", 25)
# A job parked by a daily quota resumes after the provider's retry delay, or after this.
LLM_JOB_QUOTA_PAUSE_SECONDS = envint("LLM_JOB_QUOTA_PAUSE_SECONDS", 3600)
# How often a job waiting on a Gemini batch polls it (a batch takes minutes to a day).
LLM_BATCH_POLL_SECONDS = envint("LLM_BATCH_POLL_SECONDS", 60)

# Which configured model (an LLMModel.name) does which stage of question construction; empty
# until an admin configures one, and the launch refuses until then
# (annotation/questions/llm_jobs.py).
LLM_MODEL_GENERATION = env("LLM_MODEL_GENERATION", "") or ""
LLM_MODEL_GUARD = env("LLM_MODEL_GUARD", "") or ""
# The entity proposals of CRAG-MM rows without one (annotation/images/entities.py): a vision model;
# empty: the generation model does it.
LLM_MODEL_ENTITIES = env("LLM_MODEL_ENTITIES", "") or ""

# The LLM model (an LLMModel.name) of the rubric jobs: build (A.3) and refinement (A.4). It must
# be a Gemini model, as evidence is gathered with search grounding and the URL context tool.
LLM_MODEL_RUBRICS = env("LLM_MODEL_RUBRICS", "") or ""

# Launch candidate generation by itself for an image that review or adjudication leaves with no
# candidate accepted or pending (annotation/questions/auto_generation.py); off unless asked for.
LLM_AUTO_GENERATE = envbool("LLM_AUTO_GENERATE", "False")
