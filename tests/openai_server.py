"""A loopback stand-in for the OpenAI API and the Hugging Face Inference API, for provider tests.

Neither vendor can run on the machines these tests run on (nor can OpenRouter, vLLM, LM
Studio or llama.cpp's server be installed here), so this small HTTP server on 127.0.0.1 plays
their part: the real ``openai`` client and httpx talk to it over real HTTP.  It speaks:

* ``POST /v1/embeddings`` (OpenAI's shape: ``{"data": [{"index", "embedding"}], "usage"}``);
  models are ``server.models`` (name -> dim), another model gets OpenAI's 404.
* ``POST /v1/chat/completions`` (non-streaming): ``choices[0].message.content`` comes from
  ``server.chat_responder(body)`` (a string is sent as it is, a dict or list as JSON text);
  ``usage`` counts prompt characters // 4 and answer characters // 4.  A ``response_format``
  whose type is in ``server.refuse_formats`` gets HTTP 400 naming ``response_format``, as
  servers without structured output answer.
* ``POST /hf/models/<model>/pipeline/feature-extraction`` (the HF Inference API under the
  base URL ``server.hf_url``): ``{"inputs": [texts]}`` -> a list of vectors; ``hf_models``
  name -> dim; ``hf_token_level`` answers token-level (3-d) vectors, ``hf_loading`` a 503.

Vectors are ``server.vector(text, dim)``: by default ``ollama_server.fake_vector`` (seeded
by the text, NOT unit length), the same for the OpenAI and HF routes, so both "serve the
same model"; a test that needs another model replaces ``vector`` on one route
(``openai_vector`` / ``hf_vector``).  ``api_key`` (when set) must come as ``Authorization:
Bearer <key>`` on every route, else 401.  ``fail_status[route]`` (route "embeddings",
"chat" or "hf") answers that route with that status.  Every request is recorded in
``server.calls`` as ``(route, body, headers)``.
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

try:  # tests/ may or may not be a package
    from .ollama_server import fake_vector
except ImportError:
    from ollama_server import fake_vector  # type: ignore[no-redef]

_HF_PATH = re.compile(r"^/hf/models/(.+)/pipeline/feature-extraction$")


class FakeProviders:
    def __init__(self) -> None:
        self.reset()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.hf_url = f"http://127.0.0.1:{self.port}/hf"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-providers", daemon=True)

    # -- lifecycle
    def start(self) -> "FakeProviders":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeProviders":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """A healthy server with no history (the fixture is shared by a test module)."""
        self.models: dict[str, int] = {"text-embedding-3-small": 384}
        self.hf_models: dict[str, int] = {"sentence-transformers/all-MiniLM-L6-v2": 384}
        self.openai_vector: Callable[[str, int], list[float]] = fake_vector
        self.hf_vector: Callable[[str, int], list[float]] = fake_vector
        self.api_key: str | None = None
        self.fail_status: dict[str, int] = {}
        self.refuse_formats: set[str] = set()
        self.hf_token_level = False
        self.hf_loading = False
        self.chat_responder: Callable[[dict[str, Any]], Any] = lambda body: {"facts": []}
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []

    def bodies(self, route: str) -> list[dict[str, Any]]:
        return [body for r, body, _ in self.calls if r == route]

    # -- the routes: (status, JSON-able body)
    def _embeddings(self, body: dict[str, Any]) -> tuple[int, Any]:
        name = str(body.get("model", ""))
        if name not in self.models:
            return 404, {"error": {"message": f"The model `{name}` does not exist", "type": "invalid_request_error",
                                   "code": "model_not_found"}}
        texts = body.get("input", "")
        texts = [texts] if isinstance(texts, str) else list(texts)
        data = [{"object": "embedding", "index": i, "embedding": self.openai_vector(t, self.models[name])}
                for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        return 200, {"object": "list", "data": data, "model": name,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def _chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in self.refuse_formats:
            return 400, {"error": {"message": f"response_format type {fmt['type']!r} is not supported",
                                   "type": "invalid_request_error", "param": "response_format"}}
        try:
            answer = self.chat_responder(body)
        except Exception as exc:  # noqa: BLE001 - a failing test responder: a 500 the test can see
            return 500, {"error": {"message": f"responder failed: {exc!r}"}}
        content = answer if isinstance(answer, str) else json.dumps(answer)
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages") or []) // 4
        return 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
                     "model": body.get("model"),
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4,
                               "total_tokens": prompt + len(content) // 4}}

    def _hf(self, model: str, body: dict[str, Any]) -> tuple[int, Any]:
        if model not in self.hf_models:
            return 404, {"error": f"Model {model} does not exist"}
        if self.hf_loading:
            return 503, {"error": f"Model {model} is currently loading", "estimated_time": 20.0}
        texts = body.get("inputs", "")
        texts = [texts] if isinstance(texts, str) else list(texts)
        dim = self.hf_models[model]
        if self.hf_token_level:
            return 200, [[self.hf_vector(w, dim) for w in t.split() or [""]] for t in texts]
        return 200, [self.hf_vector(t, dim) for t in texts]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                hf = _HF_PATH.match(self.path)
                route = ("embeddings" if self.path == "/v1/embeddings" else
                         "chat" if self.path == "/v1/chat/completions" else "hf" if hf else self.path)
                with server._lock:
                    server.calls.append((route, body, {k.lower(): v for k, v in self.headers.items()}))
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided",
                                                      "type": "invalid_request_error", "code": "invalid_api_key"}})
                if route in server.fail_status:
                    return self._send(server.fail_status[route], {"error": {"message": "injected failure"}})
                if route == "embeddings":
                    return self._send(*server._embeddings(body))
                if route == "chat":
                    return self._send(*server._chat(body))
                if hf:
                    return self._send(*server._hf(hf.group(1), body))
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

        return Handler
