"""A loopback stand-in for an Ollama server, for tests of the ``ollama`` client path.

No real Ollama server can run on the machines these tests run on, so this small
HTTP server on 127.0.0.1 plays its part: the real ``ollama`` Python client talks
to it over real HTTP.  It speaks the endpoints the client uses: ``POST
/api/embed`` (answers ``{"model", "embeddings": [[...]], ...}``), ``POST
/api/embeddings`` (the old single-prompt form), ``POST /api/chat`` (non-streaming
only, see below), ``GET /api/tags`` and ``GET /api/version``.  Vectors are
deterministic functions of the input text (blake2b-seeded), deliberately NOT
unit length so the client must normalise.  Every input received is recorded in
``server.inputs`` so tests can check the task prefixes that were sent.

Chat (``POST /api/chat`` with ``"stream": false``): the answer's
``message.content`` comes from ``server.chat_responder(body)``, which returns a
string (sent as the content as it is, so a test can send invalid JSON), a dict
or list (sent as JSON text), or ``(status, body_dict)`` for an HTTP error.  The
default responder answers ``{"facts": server.chat_facts}`` (the test hook: set
``chat_facts`` to the facts the "model" should find) unless the request's
``format`` schema asks for ``verdicts``, then ``{"verdicts": server.chat_verdicts}``.
Every chat body is recorded in ``server.chat_requests``.  Faults:
``chat_fail_status`` answers chat with that HTTP status (e.g. 500) once
``chat_fail_after`` chat calls have succeeded (0: from the first);
``fail_status`` fails every request, as before.  Models known to chat are
``chat_models``; another model gets Ollama's 404 "not found, try pulling it".
Token counts are reported as ``prompt_eval_count`` = characters of the messages
// 4 and ``eval_count`` = characters of the answer // 4.

Usage::

    with FakeOllama(models={"nomic-embed-text": 768}) as server:
        OllamaEmbedder(host=server.url)
        server.chat_facts = [{"turn": 0, "subject": "Ann", "predicate": "lives_in",
                              "object": "Lisbon", "text": "Ann lives in Lisbon"}]
        LLMExtractor(host=server.url).extract(turns)
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

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
        # chat (see the module docstring)
        self.chat_models: set[str] = {"llama3.1:8b"}
        self.chat_facts: list[Any] = []
        self.chat_verdicts: list[Any] = []
        self.chat_requests: list[dict[str, Any]] = []
        self.chat_responder: Callable[[dict[str, Any]], Any] = self.default_chat_responder
        self.chat_fail_status: int | None = None
        self.chat_fail_after = 0
        self._chat_ok = 0
        self.errors: list[BaseException] = []  # exceptions raised by chat_responder
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-ollama", daemon=True)  # a quick shutdown

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

    # -- chat

    def default_chat_responder(self, body: dict[str, Any]) -> Any:
        """``{"facts": chat_facts}``, or ``{"verdicts": chat_verdicts}`` when the schema asks for them."""
        schema = body.get("format")
        if isinstance(schema, dict) and "verdicts" in (schema.get("properties") or {}):
            return {"verdicts": list(self.chat_verdicts)}
        return {"facts": list(self.chat_facts)}

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.chat_requests.append(body)
        name = str(body.get("model", ""))
        if name not in self.chat_models and f"{name}:latest" not in self.chat_models:
            return 404, {"error": f'model "{name}" not found, try pulling it first'}
        if body.get("stream", True) is not False:
            return 400, {"error": "the fake server only answers stream: false"}
        if self.chat_fail_status and self._chat_ok >= self.chat_fail_after:
            return self.chat_fail_status, {"error": "injected chat failure"}
        try:
            answer = self.chat_responder(body)
        except Exception as exc:  # noqa: BLE001 - a failing test responder: a 500 the test can see
            with self._lock:
                self.errors.append(exc)
            return 500, {"error": f"responder failed: {exc!r}"}
        if isinstance(answer, tuple):
            return answer
        self._chat_ok += 1
        content = answer if isinstance(answer, str) else json.dumps(answer)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
        return 200, {
            "model": name, "created_at": "2024-05-15T10:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": True, "done_reason": "stop", "total_duration": 1000, "load_duration": 10,
            "prompt_eval_count": prompt_chars // 4, "eval_count": len(content) // 4,
        }

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
                if self.path == "/api/chat":
                    return self._send(*server._chat(body))
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
