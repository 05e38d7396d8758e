"""A loopback stand-in for an Ollama server, for tests of the ``ollama`` client path.

It speaks the endpoints the client uses: ``POST /api/embed`` (answers
``{"model", "embeddings": [[...]], ...}``), ``POST /api/embeddings`` (the old
single-prompt form), ``GET /api/tags`` and ``GET /api/version``.  Vectors are
deterministic functions of the input text (blake2b-seeded), deliberately NOT
unit length so the client must normalise.  Every input received is recorded in
``server.inputs`` so tests can check the task prefixes that were sent.

Usage::

    with FakeOllama(models={"nomic-embed-text": 768}) as server:
        OllamaEmbedder(host=server.url)
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def fake_vector(text: str, dim: int) -> list[float]:
    """The deterministic, unnormalised vector the fake server returns for ``text``."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(dim) * 3.0 + 0.5).tolist()


class FakeOllama:
    def __init__(self, models: dict[str, int] | None = None) -> None:
        self.models = dict(models if models is not None else {"nomic-embed-text": 768})
        self.inputs: list[str] = []  # every text received, in order
        self.requests: list[dict[str, Any]] = []  # every decoded JSON body
        self.fail_status: int | None = None  # answer every request with this HTTP status
        self.bad_count = False  # answer /api/embed with one vector too few
        self.delay = 0.0  # seconds to wait before answering a POST
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-ollama", daemon=True)

    # -- lifecycle

    def start(self) -> "FakeOllama":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOllama":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the HTTP side

    def _model(self, name: str) -> int | None:
        if name in self.models:
            return self.models[name]
        if ":" not in name and f"{name}:latest" in self.models:
            return self.models[f"{name}:latest"]
        if name.endswith(":latest") and name[: -len(":latest")] in self.models:
            return self.models[name[: -len(":latest")]]
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                with server._lock:
                    server.requests.append(body)
                return body

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if server.fail_status:
                    return self._send(server.fail_status, {"error": "injected failure"})
                if self.path == "/api/tags":
                    return self._send(
                        200,
                        {
                            "models": [
                                {"name": m, "model": m, "size": 0, "digest": "0" * 64, "details": {"family": "bert"}}
                                for m in server.models
                            ]
                        },
                    )
                if self.path == "/api/version":
                    return self._send(200, {"version": "0.0.0-fake"})
                return self._send(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:  # noqa: N802
                body = self._body()
                if server.delay:
                    time.sleep(server.delay)
                if server.fail_status:
                    return self._send(server.fail_status, {"error": "injected failure"})
                name = str(body.get("model", ""))
                dim = server._model(name)
                if self.path == "/api/embed":
                    if dim is None:
                        return self._send(404, {"error": f'model "{name}" not found, try pulling it first'})
                    texts = body.get("input", "")
                    texts = [texts] if isinstance(texts, str) else list(texts)
                    with server._lock:
                        server.inputs.extend(texts)
                    vectors = [fake_vector(t, dim) for t in texts]
                    if server.bad_count and vectors:
                        vectors = vectors[:-1]
                    return self._send(
                        200,
                        {
                            "model": name,
                            "embeddings": vectors,
                            "total_duration": 1000,
                            "load_duration": 10,
                            "prompt_eval_count": sum(len(t.split()) for t in texts),
                        },
                    )
                if self.path == "/api/embeddings":
                    if dim is None:
                        return self._send(404, {"error": f'model "{name}" not found, try pulling it first'})
                    prompt = str(body.get("prompt", ""))
                    with server._lock:
                        server.inputs.append(prompt)
                    return self._send(200, {"embedding": fake_vector(prompt, dim)})
                return self._send(404, {"error": f"no route {self.path}"})

        return Handler
