"""One structured chat call to any OpenAI-compatible endpoint (OpenRouter by default).

``OpenAIChat`` is the transport the LLM extractor and arbiter (``extract/llm.py``) use when
config ``llm_provider = "openai"``: ``POST <llm_base_url>/chat/completions`` through the
official ``openai`` client, with the system prompt and the turns as messages,
``temperature`` 0, ``max_tokens`` = the extractor's output bound, and structured output:

1. ``response_format = {"type": "json_schema", "json_schema": {"name", "schema"}}`` (OpenAI,
   OpenRouter, vLLM, LM Studio, llama.cpp's server all accept it);
2. an endpoint that refuses it (HTTP 400 naming ``response_format``) is asked again with
   ``{"type": "json_object"}``, and then with none; the mode that worked is kept for the run;
3. whatever comes back is read by :func:`json_text`, which also takes the JSON object out
   of a fenced block or prose around it (the fallback parse).

The API key: ``BM_LLM_API_KEY``, else ``OPENROUTER_API_KEY``, else ``OPENAI_API_KEY`` (a
keyless local server is sent a placeholder).  Tokens counted against the caps are the
answer's ``usage.prompt_tokens + completion_tokens`` when reported, else the estimate.  A
server that cannot be reached, refuses the key or lacks the model raises
:class:`~brandmind.errors.ExtractorUnavailable` naming the fix.  ``openai`` is imported at
the first call.
"""
from __future__ import annotations

import json
import os
from typing import Any

from ..errors import ExtractorUnavailable, InvalidInput

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
KEY_VARIABLES = ("BM_LLM_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")
MODES = ("json_schema", "json_object", "plain")


def json_text(content: str | None) -> str | None:
    """The JSON object in an answer: the whole text when it parses, else the span from its
    first ``{`` to its last ``}`` (a fenced ```json block, or prose around it); None if none."""
    if not isinstance(content, str):
        return None
    text = content.strip()
    try:
        json.loads(text)
        return text
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    inner = text[start:end + 1]
    try:
        json.loads(inner)
    except ValueError:
        return None
    return inner


class OpenAIChat:
    """``chat(system, user, schema, estimate) -> (content, tokens)`` over an OpenAI-compatible API."""

    def __init__(self, model: str, base_url: str | None, budget: Any, *, api_key: str | None = None,
                 timeout: float = 120, max_output_tokens: int = 1024, max_retries: int = 1) -> None:
        if not model or not isinstance(model, str):
            raise InvalidInput("the LLM model name is empty", hint="e.g. `bm config set llm_model openai/gpt-4o-mini`")
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.budget = budget
        self.api_key = api_key or next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        self.timeout = timeout
        self.max_output_tokens = max_output_tokens
        self.max_retries = max_retries
        self.mode = MODES[0]
        self._client: Any = None

    def _hint(self) -> str:
        return (f"check that {self.base_url} is up and serves {self.model!r} (`bm config set llm_base_url URL`, "
                "`bm config set llm_model NAME`), or use the offline extractor: `bm config set extractor rules`")

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise ExtractorUnavailable("the `openai` Python package is not installed",
                                           hint="pip install 'brandmind[openai]', or `bm config set extractor rules`"
                                           ) from exc
            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "no-key",
                                         timeout=self.timeout, max_retries=self.max_retries)
        return self._client

    def _format(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        name = "verdicts" if "verdicts" in (schema.get("properties") or {}) else "facts"
        if self.mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        return {"type": "json_object"} if self.mode == "json_object" else None

    def _create(self, system: str, user: str, schema: dict[str, Any]) -> Any:
        """The completion, stepping down the structured-output modes an endpoint refuses."""
        client = self._get_client()
        import openai

        while True:
            fmt = self._format(schema)
            extra = {"response_format": fmt} if fmt is not None else {}
            try:
                return client.chat.completions.create(
                    model=self.model, temperature=0, max_tokens=self.max_output_tokens,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}], **extra)
            except openai.BadRequestError as exc:
                if fmt is None or "response_format" not in str(exc):
                    raise
                self.mode = MODES[MODES.index(self.mode) + 1]

    def chat(self, system: str, user: str, schema: dict[str, Any], estimate: int) -> tuple[str | None, int]:
        """One call: ``(JSON text, tokens used)``; None when the answer held no JSON object.
        Raises ExtractorUnavailable when the endpoint cannot answer at all."""
        import openai

        where = f"the chat endpoint at {self.base_url}"
        try:
            response = self._create(system, user, schema)
        except openai.AuthenticationError as exc:
            raise ExtractorUnavailable(f"{where} refused the API key (HTTP 401)",
                                       hint="set BM_LLM_API_KEY (or OPENROUTER_API_KEY / OPENAI_API_KEY), "
                                            "or `bm config set extractor rules`") from exc
        except openai.NotFoundError as exc:
            raise ExtractorUnavailable(f"{where} has no model {self.model!r} (HTTP 404)",
                                       hint="`bm config set llm_model NAME` to a model it serves, "
                                            "or `bm config set extractor rules`") from exc
        except openai.APIStatusError as exc:
            raise ExtractorUnavailable(f"{where} refused the chat request (HTTP {exc.status_code})",
                                       hint=self._hint()) from exc
        except openai.APIConnectionError as exc:
            raise ExtractorUnavailable(f"cannot reach {where}: {exc}", hint=self._hint()) from exc
        except Exception:  # noqa: BLE001 - an unreadable HTTP answer (not JSON, wrong shape)
            self.budget.spend(estimate)
            return None, estimate
        used = estimate
        usage = getattr(response, "usage", None)
        prompt_n = getattr(usage, "prompt_tokens", None)
        completion_n = getattr(usage, "completion_tokens", None)
        if isinstance(prompt_n, int) and isinstance(completion_n, int) and prompt_n >= 0 and completion_n >= 0:
            used = prompt_n + completion_n
        self.budget.spend(used)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        return json_text(content), used
