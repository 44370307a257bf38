"""Tools defined as data: one HTTP API call each, described by an ``HttpToolConfig``.

An operator describes the endpoint (URL, method, headers, how tool arguments
map to query or body fields, where in the JSON answer the result is) and
``make_http_tool`` turns it into an ordinary ``Tool``. Requests go through
the guarded client, so the destination rules of ``tools.net`` apply here too.

Credentials: ``${NAME}`` in the URL or a header value is replaced at call time
by the calling user's secret ``name`` (lower-case) or else by the operator's
``env_lookup(NAME)``, which reads only names that start with ``ENV_PREFIX``
(``TOOL_``). Tools never read the environment themselves. Secret
values are scrubbed from every error and result, since both reach the model
(by the executor, for every tool: ``tools.redaction``).

Retries belong to the executor: 429, 5xx, timeouts and connection failures
raise ``TransientToolError`` (``RetryAfter`` when the server said how long to
wait) and the tool's ``ToolPolicy`` says how often and how long to back off.
Other 4xx answers are final.

The policy's ``timeout_s`` is the config's ``timeout_s``: the executor applies
it to each attempt, and retries happen between attempts, so it never cuts a
retry short. The client's own deadline is one second longer, as a backstop
that ends the request shortly after the executor has given up on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import quote

from jsonpath_ng import JSONPath
from jsonpath_ng import parse as parse_jsonpath
from jsonpath_ng.exceptions import JSONPathError

from tools.base import SideEffects, Tool, ToolContext, ToolPolicy
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.net.client import GuardedResponse, RetryAfter, guarded_request, parse_retry_after

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
EnvLookup = Callable[[str], str | None]

# Placeholders may read only environment variables with this prefix (the
# operator's ``env_lookup`` enforces it), so an admin-defined URL or header can
# never carry DATABASE_URL or the secret key to another host. Defined here, with
# the error text that advises it, so the advice names exactly what is read.
ENV_PREFIX = "TOOL_"

_QUERY_METHODS = frozenset({"GET", "DELETE"})
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CLIENT_GRACE_S = 1.0
_MAX_ERROR_CHARS = 300
# Answers the model can fix by calling again with other arguments.
_ARGUMENT_STATUSES = frozenset({400, 404, 422})


@dataclass(frozen=True)
class HttpToolConfig:
    """How one HTTP tool calls its endpoint. Checked at construction, i.e. at start-up."""

    url: str
    method: HttpMethod = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    # Tool argument name -> query parameter (GET, DELETE) or JSON body field
    # (POST, PUT, PATCH). Unmapped arguments are sent under their own name.
    params_mapping: Mapping[str, str] = field(default_factory=dict)
    # JSONPath into the JSON answer: one match gives that value, several a list.
    response_path: str | None = None
    timeout_s: float = 10.0
    max_attempts: int = 3
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    # When not empty, the URL's host and every redirect's host must equal or be
    # a subdomain of one of these.
    allowed_domains: tuple[str, ...] | list[str] = ()
    max_response_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if self.method not in get_args(HttpMethod):
            raise ValueError(f"method must be one of {get_args(HttpMethod)}, got {self.method!r}")
        if not self.url.lower().startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        if self.timeout_s <= 0 or self.max_response_bytes <= 0:
            raise ValueError("timeout_s and max_response_bytes must be positive")
        if any(not isinstance(v, str) for v in self.headers.values()):
            raise ValueError("header values must be strings")
        object.__setattr__(self, "allowed_domains", tuple(d.lower() for d in self.allowed_domains))
        if self.response_path is not None:
            _compile_path(self.response_path)

    def policy(self, side_effects: SideEffects) -> ToolPolicy:
        """The executor's policy for this endpoint: per-attempt timeout and retries."""
        return ToolPolicy(
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            backoff_initial_s=self.backoff_initial_s,
            backoff_max_s=self.backoff_max_s,
            side_effects=side_effects,
        )


def make_http_tool(
    *,
    name: str,
    description: str,
    parameters: dict[str, Any],
    config: HttpToolConfig,
    side_effects: SideEffects = "read_only",
    env_lookup: EnvLookup = lambda name: None,
) -> Tool:
    """A ``Tool`` that calls the endpoint in ``config`` with the model's arguments.

    ``env_lookup`` resolves ``${NAME}`` placeholders the user has no secret
    for (e.g. ``env.str`` from settings); it is the only way in for operator
    credentials.
    """
    path = _compile_path(config.response_path) if config.response_path is not None else None

    def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        return _call(config, path, arguments, context, env_lookup, side_effects)

    return Tool(
        name=name,
        description=description,
        parameters=parameters,
        handler=handler,
        policy=config.policy(side_effects),
    )


def _call(
    config: HttpToolConfig,
    path: JSONPath | None,
    arguments: dict[str, Any],
    context: ToolContext,
    env_lookup: EnvLookup,
    side_effects: SideEffects = "read_only",
) -> Any:
    """One attempt: build the request, send it, interpret the answer. Every
    value filled into a placeholder is recorded on the context, and the
    executor scrubs them from the result and any error (tools.redaction)."""
    try:
        url = _substitute(config.url, context, env_lookup, in_url=True)
        headers = {k: _substitute(v, context, env_lookup, in_url=False) for k, v in config.headers.items()}
        if side_effects != "read_only" and context.idempotency_key:
            # The same key on every retry and redelivery of this call, so an
            # API that honours it acts once (the outside window no engine can close).
            headers.setdefault("Idempotency-Key", context.idempotency_key)
        fields = {config.params_mapping.get(k, k): v for k, v in arguments.items() if v is not None}
        as_query = config.method in _QUERY_METHODS
        response = guarded_request(
            config.method,
            url,
            headers=headers,
            params=_query_params(fields) if as_query else None,
            json=None if as_query else fields,
            timeout_s=config.timeout_s + _CLIENT_GRACE_S,
            max_bytes=config.max_response_bytes,
            allowed_domains=config.allowed_domains,
        )
        _raise_for_status(response)
        return _result(response, path, config.response_path)
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug: said plainly (the executor scrubs secrets)
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def _substitute(template: str, context: ToolContext, env_lookup: EnvLookup, *, in_url: bool) -> str:
    """Replace each ``${NAME}``; each value is recorded so it is scrubbed from output.

    Values in a URL are percent-encoded: a placeholder stands for one value
    (a key, an id), never for URL structure the value could otherwise change.
    """

    def replace(match: re.Match[str]) -> str:
        value = _lookup(match.group(1), context, env_lookup)
        if in_url:
            return quote(value, safe="")
        if "\r" in value or "\n" in value:
            raise ToolError(
                f"the value of ${{{match.group(1)}}} cannot be used in a header (it contains a line break)"
            )
        return value

    return _PLACEHOLDER.sub(replace, template)


def _lookup(name: str, context: ToolContext, env_lookup: EnvLookup) -> str:
    value = context.secret(name.lower())
    if value is None:
        value = env_lookup(name)
        if value:
            context.uses_secret(value)
    if not value:
        raise ToolError(missing_value_message(name))
    return value


def missing_value_message(name: str) -> str:
    """What to do about ``${name}`` without a value, naming only what the lookup reads:
    the user's secret, and an environment variable only where one can fill it."""
    needed = f"this tool needs ${{{name}}}, which is not set: the user can add a secret named '{name.lower()}'"
    if name.startswith(ENV_PREFIX):
        return f"{needed}, or the operator can set the environment variable {name}"
    operator_name = f"{ENV_PREFIX}{name}"
    return (
        f"{needed} (an operator's value needs the placeholder ${{{operator_name}}} and the environment "
        f"variable {operator_name}: only {ENV_PREFIX} variables are read)"
    )


def _query_params(fields: dict[str, Any]) -> dict[str, Any]:
    """Scalars and lists of scalars go as they are (lists repeat the key); objects as JSON text."""

    def encode(value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"))
        if isinstance(value, list):
            return [encode(v) if not isinstance(v, (dict, list)) else json.dumps(v) for v in value]
        return value

    return {key: encode(value) for key, value in fields.items()}


def _raise_for_status(response: GuardedResponse) -> None:
    """Map an error status to the failure kind the executor acts on."""
    status = response.status_code
    if status < 400:
        return
    message = f"the service answered {status} {response.reason_phrase}".rstrip()
    detail = _server_message(response)
    if detail:
        message = f"{message}: {detail}"
    if status == 429 or status >= 500:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is not None:
            raise RetryAfter(message, retry_after_s=retry_after)
        raise TransientToolError(message)
    if status in _ARGUMENT_STATUSES:
        raise ToolArgumentError(message)
    raise ToolError(message)


def _server_message(response: GuardedResponse) -> str:
    """The server's own explanation, trimmed: a JSON error field if there is one, else the text."""
    text = response.text.strip()
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "error_description", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value.strip():
                text = value.strip()
                break
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."


def _result(response: GuardedResponse, path: JSONPath | None, path_text: str | None) -> Any:
    """The JSON answer (or the part ``path`` selects), else the answer's text."""
    try:
        data = response.json()
    except ValueError:
        if path is not None:
            raise ToolError(
                f"the service did not answer with JSON, so {path_text} cannot be read"
                + (" (the answer was cut at the size limit)" if response.truncated else "")
            ) from None
        return response.text
    if path is None:
        return data
    matches = [match.value for match in path.find(data)]
    if not matches:
        raise ToolError(f"the service's answer has nothing at {path_text}")
    return matches[0] if len(matches) == 1 else matches


def _compile_path(path: str) -> JSONPath:
    try:
        return parse_jsonpath(path)
    except JSONPathError as exc:
        raise ValueError(f"response_path {path!r} is not a valid JSONPath: {exc}") from None


