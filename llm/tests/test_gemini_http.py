"""How the Gemini provider sends: one aiohttp session per gateway that never leaves the event
loop's thread on a request (aiohttp's `trust_env` reads ~/.netrc and the proxy variables in a
worker thread on every request), yet still goes through a proxy the environment names."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from pydantic import BaseModel

from llm.gateway import Gateway
from llm.ratelimit import MemoryTokenBucket
from tests.fake_llm import Reply, _gemini_body

from .conftest import GEMINI, Harness, run_async

pytestmark = pytest.mark.django_db(transaction=True)


class Answer(BaseModel):
    answer: str


def test_calls_leave_the_loop_thread_only_for_the_ledger_and_close_their_session(harness):
    harness.fake.default = Reply(text='{"answer": "yes"}')
    seen: dict[str, Any] = {}

    async def go() -> list[bool]:
        try:
            async with Gateway(limiter=MemoryTokenBucket(), conf=harness.conf) as gateway:
                results = await asyncio.gather(
                    *(
                        gateway.call_structured(
                            GEMINI, prompt=[f"question {n}"], schema=Answer, stage="test"
                        )
                        for n in range(5)
                    )
                )
                # No request ran anything in the loop's default executor (where aiohttp's
                # trust_env sends its netrc and proxy lookups, two a request).
                seen["executor"] = asyncio.get_running_loop()._default_executor
                seen["session"] = getattr(gateway._provider("gemini"), "_session", None)
            return [result.ok for result in results]
        finally:
            await sync_to_async(connections.close_all)()

    assert run_async(go) == [True] * 5
    assert len(harness.fake.requests) == 5
    assert seen["executor"] is None
    assert seen["session"] is not None and seen["session"].closed  # closed with the gateway


def test_a_proxy_named_in_the_environment_is_still_used(harness, monkeypatch):
    """HTTP(S)_PROXY is read once, when the session is made, instead of on every request."""
    asked: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (the base class's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            asked.append(self.path)  # a proxy is asked for the absolute URL
            data = json.dumps(_gemini_body(Reply(text='{"answer": "via the proxy"}'))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.02}).start()
    try:
        for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        call = Harness.call(harness, GEMINI, prompt=["anything"], schema=Answer)
    finally:
        proxy.shutdown()
        proxy.server_close()

    assert call.ok and call.output.answer == "via the proxy"
    assert harness.fake.requests == []  # the fake itself was never asked
    assert len(asked) == 1
    assert asked[0].startswith(f"{harness.fake.base_url}/v1beta/models/gemini-2.5-flash:")


def test_clients_share_one_tls_context_instead_of_loading_the_ca_bundle_per_chunk(monkeypatch):
    """A chunk makes its own gateway, so its own SDK client: the CA bundle is loaded once per
    process, not three times a client (about 70 ms of CPU a chunk)."""
    import ssl

    from llm import providers
    from llm.providers import GatewaySettings, Gemini

    providers._tls_context()  # the process's one context, made before counting
    made: list[object] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(args or kwargs)
        return create(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    conf = GatewaySettings(gemini_api_key="k", gemini_base_url="http://127.0.0.1:9")

    async def two_chunks() -> None:
        for _ in range(2):
            gemini = Gemini(conf)
            assert gemini._client is not None
            await gemini.aclose()

    run_async(two_chunks)
    assert made == []
