"""Answer generators: the last stage of the RAG pipeline, given a question and context passages.

Every generator has ``generate(question, context_passages) -> GeneratedAnswer`` and an ``identity``
string (part of the pipeline's cache key). Two implementations:

- :class:`LocalGenerator` runs a local transformers causal LM greedily. Its default is the packaged
  proxy, SmolLM2-135M-Instruct: it needs nothing but this package and answers in a few seconds on
  a CPU, but it is *tiny* and its answers are weak; it exists so the pipeline runs anywhere. Pass a
  larger local model (``load_proxy("path/to/model")``) or use an endpoint for real answers.
- :class:`OpenAIChatGenerator` calls any server that speaks OpenAI's ``/v1/chat/completions``
  (vLLM, llama.cpp's server, Ollama, TGI, OpenAI itself) over httpx.

The prompt is built in one place, :func:`build_messages`, for both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from ragattn._optional import require
from ragattn.errors import GeneratorError, InputTooLargeError, InvalidInputError
from ragattn.greedy import greedy_complete
from ragattn.proxy import DEFAULT_PROXY, Proxy, load_proxy

logger = logging.getLogger(__name__)

INSTRUCTION = (
    "Answer the question using only the context passages. "
    "Reply with the answer alone, in a few words."
)
"""The system instruction every generator sends; change it here and nowhere else.

No "say I don't know" clause: with it, the 135M default answered off-topic pleasantries even
when the answer was in the first passage (checked by hand on the demo corpus)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One chat turn in OpenAI's ``messages`` format (``role`` is system, user or assistant)."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True, kw_only=True)
class GeneratedAnswer:
    """An answer and what it cost.

    Attributes:
        text: the generated answer, whitespace-stripped.
        prompt_tokens: tokens of the prompt in the generator's tokenizer (as the server reports it
            for endpoints; ``None`` when an endpoint reports no usage).
        completion_tokens: generated tokens, same tokenizer (``None`` when not reported).
        seconds: wall-clock seconds of the generation call (request round trip for endpoints).
        model: the model that answered (the proxy's name, or the endpoint's ``model`` field).
    """

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    model: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Generator(Protocol):
    """Anything that answers a question from context passages."""

    @property
    def identity(self) -> str:
        """Everything about this generator that can change an answer (model, limits, sampling)."""
        ...

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer: ...


def build_messages(question: str, context_passages: Sequence[str]) -> tuple[ChatMessage, ...]:
    """The chat prompt: :data:`INSTRUCTION` as the system turn, numbered passages and the question.

    Passages are numbered ``[1]``, ``[2]`` … in the order given (the pipeline decides the order).

    Raises:
        InvalidInputError: an empty question or a passage that is not a string.
    """
    if not isinstance(question, str) or not question.strip():
        raise InvalidInputError("question must be a non-empty string")
    if isinstance(context_passages, str) or not all(isinstance(p, str) for p in context_passages):
        raise InvalidInputError("context_passages must be a list of strings")
    blocks = [f"[{n}] {p.strip()}" for n, p in enumerate(context_passages, start=1) if p.strip()]
    context = "\n\n".join(blocks) if blocks else "(no context)"
    user = f"Context:\n{context}\n\nQuestion: {question.strip()}"
    return (ChatMessage(role="system", content=INSTRUCTION), ChatMessage(role="user", content=user))


class LocalGenerator:
    """Greedy generation with a local transformers causal LM, through its chat template.

    The default is the packaged SmolLM2-135M-Instruct proxy: tiny (135M parameters), CPU-only and
    deterministic, so answers are short and often wrong on multi-hop questions. Share a loaded
    proxy with the reranker and compressor to hold one copy of the weights.

    Args:
        proxy: a loaded :class:`~ragattn.proxy.Proxy` or a name/path for
            :func:`~ragattn.proxy.load_proxy` (default: the packaged SmolLM2-135M).
        max_new_tokens: most tokens generated per answer.
        threads: torch intra-op threads when ``proxy`` is loaded here (None = torch's default).

    Raises:
        InvalidInputError: ``max_new_tokens < 1``.
        ModelLoadError: the proxy cannot be loaded.
    """

    def __init__(
        self,
        proxy: str | Proxy = DEFAULT_PROXY,
        *,
        max_new_tokens: int = 48,
        threads: int | None = None,
    ) -> None:
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InvalidInputError("max_new_tokens must be a positive integer")
        self.proxy = proxy if isinstance(proxy, Proxy) else load_proxy(proxy, threads=threads)
        self.max_new_tokens = max_new_tokens
        if not getattr(self.proxy.tokenizer, "chat_template", None):
            raise InvalidInputError(
                f"model {self.proxy.name!r} has no chat template; use an instruction-tuned model"
            )

    @property
    def identity(self) -> str:
        return (
            f"local:{self.proxy.name}:{self.proxy.source}:{self.proxy.dtype}"
            f":greedy:max_new_tokens={self.max_new_tokens}"
        )

    @property
    def tokenizer(self) -> Any:
        return self.proxy.tokenizer

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        """Answer ``question`` from ``context_passages`` (greedy, at most ``max_new_tokens``).

        Raises:
            InvalidInputError: empty question or malformed passages.
            InputTooLargeError: the prompt plus ``max_new_tokens`` exceeds the model's positions.
        """
        return self.chat(build_messages(question, context_passages))

    def chat(self, messages: Sequence[ChatMessage]) -> GeneratedAnswer:
        """Greedy completion of ``messages`` rendered with the model's chat template
        (:func:`~ragattn.greedy.greedy_complete`)."""
        prompt = self.proxy.tokenizer.apply_chat_template(
            [m.to_dict() for m in messages], tokenize=False, add_generation_prompt=True
        )
        try:
            done = greedy_complete(self.proxy, prompt, max_new_tokens=self.max_new_tokens)
        except InputTooLargeError as exc:
            raise InputTooLargeError(f"{exc}; retrieve fewer passages or compress harder") from exc
        return GeneratedAnswer(
            text=done.text,
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            seconds=done.seconds,
            model=self.proxy.name,
        )


class OpenAIChatGenerator:
    """A client of an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

    ``base_url`` follows the OpenAI SDK convention and includes the version prefix, e.g.
    ``http://localhost:8000/v1``. Transport and HTTP failures become :class:`GeneratorError`.

    Args:
        base_url: the API root including ``/v1``.
        model: the ``model`` field sent with each request.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given (never logged).
        timeout: seconds for connect, read and write of one request.
        max_tokens: most tokens generated per answer.
        temperature: sampling temperature; 0 asks for greedy decoding.

    Raises:
        MissingDependencyError: httpx is not installed (``pip install 'ragattn[client]'``).
        InvalidInputError: an empty ``base_url`` / ``model`` or a non-positive limit.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 256,
        temperature: float = 0.0,
    ) -> None:
        httpx = require("httpx", extra="client")
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"base_url must start with http:// or https://: {base_url!r}")
        if not model:
            raise InvalidInputError("model must be a non-empty string")
        if max_tokens < 1 or timeout <= 0 or temperature < 0:
            raise InvalidInputError("max_tokens and timeout must be positive, temperature >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._httpx = httpx
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def __repr__(self) -> str:
        return f"OpenAIChatGenerator(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def identity(self) -> str:
        return (
            f"openai:{self.base_url}:{self.model}:temperature={self.temperature}"
            f":max_tokens={self.max_tokens}"
        )

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        """Answer ``question`` from ``context_passages`` with one chat-completions request.

        Raises:
            InvalidInputError: empty question or malformed passages.
            GeneratorError: the endpoint is unreachable, times out, answers with an HTTP error or
                with a body that is not a chat completion.
        """
        return self.chat(build_messages(question, context_passages))

    def chat(self, messages: Sequence[ChatMessage]) -> GeneratedAnswer:
        """One ``chat/completions`` request for ``messages``."""
        url = f"{self.base_url}/chat/completions"
        payload = {
            "model": self.model,
            "messages": [m.to_dict() for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": False,
        }
        httpx = self._httpx
        started = time.perf_counter()
        try:
            resp = self._client.post(url, json=payload)
        except httpx.TimeoutException as exc:
            raise GeneratorError(
                f"the generator at {url} did not answer within the timeout "
                f"({type(exc).__name__}); raise the timeout or check the server"
            ) from exc
        except httpx.HTTPError as exc:
            raise GeneratorError(
                f"cannot reach the generator at {url} ({type(exc).__name__}: {exc}); "
                "check --base-url and that the server is running"
            ) from exc
        seconds = time.perf_counter() - started
        if resp.status_code >= 400:
            raise GeneratorError(
                f"the generator at {url} answered HTTP {resp.status_code}"
                f"{_hint(resp.status_code)}: {_error_detail(resp)}"
            )
        return _parse_completion(resp, url, seconds, self.model)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChatGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hint(status: int) -> str:
    if status in (401, 403):
        return " (the API key was rejected; check --api-key-env)"
    if status == 404:
        return " (no such route or model; check --base-url, which must include /v1, and --model)"
    if status == 429:
        return " (rate limited; retry later)"
    return ""


def _error_detail(resp: Any) -> str:
    """The server's error message, shortened; OpenAI puts it at ``error.message``."""
    try:
        body = resp.json()
        err = body.get("error") if isinstance(body, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
        text = str(message if message else body)
    except ValueError:
        text = resp.text
    return " ".join(text.split())[:300]


def _parse_completion(resp: Any, url: str, seconds: float, model: str) -> GeneratedAnswer:
    try:
        body = resp.json()
        content = body["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError("message.content is not a string")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise GeneratorError(
            f"the generator at {url} did not return a chat completion ({type(exc).__name__}: "
            f"{exc}); is it an OpenAI-compatible server?"
        ) from exc
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return GeneratedAnswer(
        text=content.strip(),
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        seconds=seconds,
        model=str(body.get("model") or model),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = [
    "INSTRUCTION",
    "ChatMessage",
    "GeneratedAnswer",
    "Generator",
    "LocalGenerator",
    "OpenAIChatGenerator",
    "build_messages",
]
