"""Production settings: refuse to start without secrets; `check --deploy` reports nothing. The
deployment files (.env.example, docker-compose.yml, Dockerfile, deploy/) say what the settings
and the app do, and the locks split the runtime from the developer tools."""

import ast
import inspect
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = {
    "GAMUT_ENV": "production",
    "SECRET_KEY": "x7!kq0-test-only-" + "a1b2c3d4e5" * 5,
    "ALLOWED_HOSTS": "gamut.example.org",
    "DATABASE_URL": "postgres://gamut:secret@db.invalid:5432/gamut",
    "REDIS_URL": "redis://redis.invalid:6379/0",
}


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV
        and k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_nothing():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("missing", ["SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"])
def test_production_refuses_to_start_without(missing):
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != missing}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert f"{missing} must be set" in result.stderr


def test_production_refuses_a_weak_secret():
    result = manage("check", env={**PRODUCTION_ENV, "SECRET_KEY": "short"})
    assert result.returncode != 0 and "SECRET_KEY must be" in result.stderr


# --- What the deployment files promise (docs/production.md) ------------------------------

SETTING_READERS = {"env", "envbool", "envint", "envlist", "required"}
# Read by something else than settings.py: compose, gunicorn, the HTTP clients.
OTHER_SETTINGS = {"POSTGRES_PASSWORD", "WEB_BIND", "GAMUT_SUBNET", "WEB_CONCURRENCY"}
OTHER_SETTINGS |= {"HTTPS_PROXY", "NO_PROXY"}
TEST_ONLY_SETTINGS = {"GAMUT_SQLITE_TEST_NAME"}


def settings_read() -> set[str]:
    """Every environment variable gamut_site/settings.py reads."""
    tree = ast.parse((ROOT / "gamut_site" / "settings.py").read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in SETTING_READERS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    } - TEST_ONLY_SETTINGS


def env_example_names() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]+)=", text, re.MULTILINE))


def test_env_example_has_every_setting_and_no_other():
    read = settings_read()
    assert {"SECRET_KEY", "GEMINI_API_KEY", "LLM_MODEL_GENERATION", "LOG_LEVEL"} <= read
    names = env_example_names()
    assert read - names == set(), "settings.py reads these, .env.example does not name them"
    assert names - read - OTHER_SETTINGS == set(), ".env.example names what nothing reads"


def test_env_example_is_refused_until_its_secret_is_set():
    """The example's placeholder secret stops a production start: nobody runs on it."""
    values = dict(
        re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    )
    assert values["GAMUT_ENV"] == "production"
    result = manage("check", env=values)
    assert result.returncode != 0 and "SECRET_KEY must be at least 50" in result.stderr


def test_the_configuration_page_names_every_setting():
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = {name for name in settings_read() | OTHER_SETTINGS if f"`{name}`" not in page}
    assert missing == set(), "docs/configuration.md does not describe these"


def test_compose_reads_env_and_migrates_once_per_deploy():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("migrate", "web", "worker", "beat"):
        assert services[name]["env_file"] == ".env", name
    migrating = [n for n, s in services.items() if "migrate" in json.dumps(s.get("command", ""))]
    assert migrating == ["migrate"] and services["migrate"]["restart"] == "no"
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    # The web runs the image's command: gunicorn with the shipped configuration.
    assert "command" not in services["web"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py"' in dockerfile
    assert "-r requirements.lock" in dockerfile and "requirements-dev.lock" not in re.sub(
        r"#.*", "", dockerfile
    )


def test_gunicorn_preloads_the_app_and_waits_as_long_as_nginx_for_imports():
    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert conf["preload_app"] is True
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    waits = {int(s) for s in re.findall(r"proxy_read_timeout (\d+)s;", nginx)}
    assert max(waits) <= conf["timeout"]


NGINX_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def nginx_size(value: str) -> int:
    """An nginx size (`5m`, `2128M`, `512k`, `1g`, bytes) in bytes."""
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()
    return int(number) * NGINX_UNITS[unit]


def nginx_body_sizes() -> tuple[int, dict[str, int]]:
    """deploy/nginx.conf's client_max_body_size for the site's server, and for each exact-path
    location that sets its own, in bytes."""
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    server = re.findall(r"^    client_max_body_size (\w+);", nginx, re.M)
    assert len(server) == 1, "one body size for the TLS server"
    locations = {}
    for path, block in nginx_locations().items():
        size = re.search(r"client_max_body_size (\w+);", block)
        # The upload gate (internal, no body read) sets 0: no size at all.
        if size and "internal;" not in block:
            locations[path] = nginx_size(size.group(1))
    return nginx_size(server[0]), locations


def site_views(patterns=None, prefix: str = "/"):
    """(path, view) of every URL pattern of the site, those of included URLconfs too."""
    from django.urls import URLResolver, get_resolver

    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from site_views(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern.callback


def view_source(callback) -> str:
    """The source of the function behind a URL: a function view, or the function DRF's api_view
    made into a class (it keeps the function's module and name)."""
    target = getattr(callback, "cls", None) or inspect.unwrap(callback)
    module = sys.modules.get(getattr(target, "__module__", None) or "")
    if module is None or not hasattr(target, "__name__"):
        return ""
    source = inspect.getsource(module)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == target.__name__:
            return ast.get_source_segment(source, node) or ""
    return ""


def test_nginx_takes_what_the_app_takes_on_every_path():
    """nginx and the app's RequestSizeMiddleware refuse the same bodies: nginx's size on every
    path is the cap the app computes from the settings (a body of exactly that size passes
    both, a byte more is a 413 from both), so neither refuses what the other would take."""
    from core.middleware import upload_cap

    default, locations = nginx_body_sizes()
    assert default == django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    caps = {path: upload_cap(view) for path, view in site_views() if upload_cap(view)}
    assert locations == caps
    # A view that reads an uploaded file is marked for the middleware (@takes_upload), so it
    # has its location here too.
    reads_files = {p for p, view in site_views() if "request.FILES" in view_source(view)}
    assert reads_files == set(caps), "a view reads request.FILES without @takes_upload"


def nginx_locations() -> dict[str, str]:
    """deploy/nginx.conf's exact-path and named locations: their bodies by path or name (the
    blocks nest `if` blocks one level deep)."""
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    return dict(re.findall(r"^    location (?:= )?(\S+) \{\n(.*?)^    \}$", nginx, re.S | re.M))


def test_every_upload_location_asks_the_gate_before_reading_a_body():
    """Each location that takes more than the app's 5 MiB asks the upload gate (auth_request)
    before nginx reads a byte of the body, sends a request without a length to the 5 MiB of
    @app, and relays the gate's refusal in the app's format (the API's JSON under /api/); the
    gate is internal, bodiless and GET, and its answer is the app's (tests/test_upload_limits.py
    holds the gate to the middleware's rule)."""
    from django.urls import resolve

    from core.views import upload_gate

    default, sizes = nginx_body_sizes()
    locations = nginx_locations()
    large = {path for path, size in sizes.items() if size > default}
    assert large == {p for p, body in locations.items() if "auth_request " in body}
    assert len(large) == 6
    for path in large:
        body = locations[path]
        kind = "api" if path.startswith("/api/") else "page"
        assert 'if ($content_length = "") {\n            return 418;\n        }' in body, path
        assert "error_page 418 = @app;" in body, path
        assert "auth_request /upload-gate/;" in body, path
        assert "auth_request_set $upload_status $upstream_status;" in body, path
        assert "auth_request_set $upload_refusal $upstream_http_x_upload_refusal;" in body
        assert f"error_page 401 403 500 = @{kind}_refused;" in body, path
    gate = locations["/upload-gate/"]
    for line in (
        "internal;",
        "client_max_body_size 0;",
        "proxy_method GET;",
        "proxy_pass_request_body off;",
        'proxy_set_header Content-Length "";',
        "proxy_set_header X-Upload-Uri $request_uri;",
        "proxy_set_header X-Upload-Length $content_length;",
        "proxy_set_header Host $http_host;",
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "proxy_set_header X-Forwarded-Proto $scheme;",
    ):
        assert f"        {line}\n" in gate, line
    assert resolve("/upload-gate/").func is upload_gate
    for kind, content_type in (
        ("page", '"text/plain; charset=utf-8"'),
        ("api", "application/json"),
    ):
        refused = locations[f"@{kind}_refused"]
        assert f"default_type {content_type};" in refused
        for status in (401, 403, 413):
            assert f"return {status} $upload_refusal;" in refused, (kind, status)
    assert "client_max_body_size" not in locations["@app"]  # the server's 5 MiB


def lock_names(name: str) -> set[str]:
    text = (ROOT / name).read_text()
    return {normalized(m) for m in re.findall(r"^([A-Za-z0-9._-]+)==", text, re.M)}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# Every module of the apps (not their tests), imported in an interpreter where the packages of
# the dev lock alone cannot be imported, as in the runtime venv of `make run` and the image.
# An optional import of one of them (a library trying aiohttp, say) falls back as it would
# there; a module of ours that needs one fails.
RUNTIME_IMPORTS = """
import importlib, json, os, pkgutil, re, sys
from importlib.metadata import packages_distributions

dev_only = set(json.loads(sys.argv[1]))
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
blocked = {
    top
    for top, dists in packages_distributions().items()
    if all(norm(d) in dev_only for d in dists)
}

class DevOnly:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (dev lock only)", name=name)
        return None

sys.meta_path.insert(0, DevOnly())
try:
    import pytest
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("pytest was importable: the dev packages are not blocked")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
import django
django.setup()

def walk(package):
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in ("tests", "inspect_package"):  # the export's own, not the app's
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            if info.ispkg:
                walk(module)

for app in ("core", "annotation", "rubrics", "llm", "judging", "gamut_site"):
    walk(importlib.import_module(app))
import gamut_site.wsgi
print(len(sys.modules), "modules")
"""


def test_runtime_lock_holds_what_the_app_imports_and_the_dev_lock_the_rest():
    runtime, dev = lock_names("requirements.lock"), lock_names("requirements-dev.lock")
    assert runtime & dev == set()
    assert {"pytest", "playwright", "mypy", "schemathesis", "inspect-ai"} <= dev
    assert {"django", "celery", "gunicorn", "google-genai", "openai", "psycopg"} <= runtime
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", RUNTIME_IMPORTS, json.dumps(sorted(dev))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "modules" in result.stdout
