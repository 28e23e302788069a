# The production image: gunicorn + whitenoise for the web, the same image for the Celery worker
# and beat. Settings come from the environment (see docker-compose.yml and docs/configuration.md).
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    STATIC_ROOT=/app/staticfiles MEDIA_ROOT=/data/media GAMUT_VAR_DIR=/data/var
WORKDIR /app
# The runtime lock only: the developer tools (requirements-dev.lock) stay out of the image.
COPY requirements.lock .
RUN pip install --no-cache-dir --disable-pip-version-check --require-hashes -r requirements.lock
COPY . .
# The documentation site the web serves at /docs/ (mkdocs.yml; strict: a broken link fails the build).
RUN NO_MKDOCS_2_WARNING=1 mkdocs build
# collectstatic needs production settings to build the hashed manifest; these values exist only
# for this build step and are not kept in the image's environment.
RUN GAMUT_ENV=production SECRET_KEY=collectstatic-only-$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=') \
    ALLOWED_HOSTS=build DATABASE_URL=sqlite:////tmp/build.sqlite3 REDIS_URL=redis://build:6379/0 \
    python manage.py collectstatic --noinput -v 0 \
 && useradd --system --create-home gamut && mkdir -p /data/media /data/var && chown -R gamut /data
USER gamut
EXPOSE 8000
# deploy/gunicorn.conf.py: the app preloaded once in the master, four workers (WEB_CONCURRENCY),
# one access line per request; X-Forwarded-Proto believed only from TRUSTED_PROXIES. Migrations
# are a step of the deploy (docker-compose.yml's migrate service), not of every start.
CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py", "-b", "0.0.0.0:8000", "gamut_site.wsgi"]
