"""gunicorn's settings for production: `gunicorn -c deploy/gunicorn.conf.py gamut_site.wsgi`
(the Docker image, docker-compose.yml and docs/production.md's native steps all start it so).

Command-line options, or gunicorn's own GUNICORN_CMD_ARGS, override any of these (the image
binds 0.0.0.0:8000 that way); WEB_CONCURRENCY sets the number of workers.
"""

import os

# Native installs: nginx on the same host is the only one to talk to gunicorn.
bind = ["127.0.0.1:8000"]
workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
# The app is imported once, in the master, before the workers fork: a restart answers as soon
# as that import is done, instead of after four workers have each imported it side by side on
# the same cores; the workers also share the imported code's memory.
preload_app = True
# An import of a few gigabytes is read and checked inside its request: a sync worker must be
# given that long (nginx's proxy_read_timeout for the upload paths is the same 600 s).
timeout = 600
graceful_timeout = 30
# X-Forwarded-Proto is believed only from our proxies, as in Django (gamut_site/proxies.py).
forwarded_allow_ips = os.environ.get("TRUSTED_PROXIES", "127.0.0.1,::1")

# One access line per request: the client's address behind the proxies and the user, both as
# the app found them (gamut_site/logs.py puts them into the request's environ), the
# request line, status, bytes sent and milliseconds. No header or body is written, so no
# password, token or cookie reaches the log.
accesslog = "-"
access_log_format = '%({gamut.client}e)s %({gamut.user}e)s "%(r)s" %(s)s %(b)s %(M)sms'
errorlog = "-"
# gunicornc is not used; two gunicorns on one host would otherwise share its default socket.
control_socket_disable = True
