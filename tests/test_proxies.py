"""Forwarded headers are believed only from our proxies (settings.TRUSTED_PROXIES): who the client
is (X-Forwarded-For, which the login limit counts by) and whether it used HTTPS
(X-Forwarded-Proto). The deployment files keep the web server behind the proxy."""

import runpy
from pathlib import Path

import pytest
import yaml
from django.test import RequestFactory

from gamut_site.proxies import client_ip
from tests.test_deploy import PRODUCTION_ENV, manage

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def proxies(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "::1"]


def address(remote_addr: str, forwarded_for: str | None = None) -> str | None:
    meta = {"REMOTE_ADDR": remote_addr}
    if forwarded_for is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return client_ip(RequestFactory().get("/", **meta))


@pytest.mark.parametrize(
    ("remote_addr", "forwarded_for", "expected"),
    [
        # Straight from a client: the header is the client's own say and is ignored.
        ("198.51.100.7", None, "198.51.100.7"),
        ("198.51.100.7", "10.0.0.5", "198.51.100.7"),
        ("198.51.100.7", "203.0.113.1, 10.0.0.2", "198.51.100.7"),
        # Through our proxy: the address the proxy appended.
        ("10.0.0.2", "198.51.100.7", "198.51.100.7"),
        # What the client wrote left of it is not believed, whatever it claims.
        ("10.0.0.2", "203.0.113.1, 10.0.0.9, 198.51.100.7", "198.51.100.7"),
        # Two of our proxies in a row (a load balancer, then the TLS proxy).
        ("10.0.0.2", "203.0.113.1, 198.51.100.7, 10.0.0.9", "198.51.100.7"),
        # The proxy itself asking (a health check), or an entry that is no address.
        ("10.0.0.2", None, "10.0.0.2"),
        ("10.0.0.2", "", "10.0.0.2"),
        ("10.0.0.2", "198.51.100.7, not-an-address", "10.0.0.2"),
        ("10.0.0.2", "198.51.100.7:4711", "10.0.0.2"),
        # IPv6, and IPv4 peers on a dual-stack socket.
        ("::1", "2001:db8::7", "2001:db8::7"),
        ("::ffff:10.0.0.2", "198.51.100.7", "198.51.100.7"),
        ("::ffff:198.51.100.7", "10.0.0.5", "198.51.100.7"),
        ("10.0.0.2", "fe80::7%eth0", "fe80::7"),
        ("fe80::2%eth0", None, "fe80::2"),
        # No usable peer address at all.
        ("", "198.51.100.7", None),
    ],
)
def test_client_address(proxies, remote_addr, forwarded_for, expected):
    assert address(remote_addr, forwarded_for) == expected


@pytest.mark.django_db
def test_forwarded_https_is_believed_only_from_a_proxy(client, settings, proxies):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    https = {"HTTP_X_FORWARDED_PROTO": "https"}
    # Through the proxy, which says the client used HTTPS: the page, not a redirect.
    assert client.get("/login/", REMOTE_ADDR="10.0.0.2", **https).status_code == 200
    # A client that reaches the server directly cannot claim HTTPS to dodge the redirect.
    response = client.get("/login/", REMOTE_ADDR="198.51.100.7", **https)
    assert response.status_code == 301
    assert response["Location"].startswith("https://")


def test_a_bad_trusted_proxy_stops_the_start_up():
    result = manage("check", env={**PRODUCTION_ENV, "TRUSTED_PROXIES": "10.0.0.0/8,10.0.0.300"})
    assert result.returncode != 0
    assert "TRUSTED_PROXIES: '10.0.0.300' is not an IP address or network" in result.stderr


def test_production_with_proxies_passes_the_deploy_check():
    env = {**PRODUCTION_ENV, "TRUSTED_PROXIES": "172.30.57.0/24,::1"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_keeps_the_web_server_behind_the_proxy(monkeypatch):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    web = compose["services"]["web"]
    # Published on the loopback interface unless asked otherwise: the proxy on the host is
    # the way in, not the server itself.
    assert web["ports"] == ["${WEB_BIND:-127.0.0.1}:8000:8000"]
    # The default trusts the compose network's own subnet (where the host's proxy arrives from).
    subnet = compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert subnet == "${GAMUT_SUBNET:-172.30.57.0/24}"
    assert compose["x-app"]["environment"]["TRUSTED_PROXIES"] == (
        "${TRUSTED_PROXIES:-${GAMUT_SUBNET:-172.30.57.0/24}}"
    )
    # The web runs the image's gunicorn with deploy/gunicorn.conf.py, which believes
    # X-Forwarded-Proto from the same proxies as Django.
    assert "command" not in web
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py", "-b", "0.0.0.0:8000"' in dockerfile
    conf = ROOT / "deploy" / "gunicorn.conf.py"
    monkeypatch.delenv("TRUSTED_PROXIES", raising=False)
    assert runpy.run_path(str(conf))["forwarded_allow_ips"] == "127.0.0.1,::1"
    monkeypatch.setenv("TRUSTED_PROXIES", "172.30.57.0/24")
    assert runpy.run_path(str(conf))["forwarded_allow_ips"] == "172.30.57.0/24"
