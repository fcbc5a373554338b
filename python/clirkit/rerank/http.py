"""A guarded JSON-over-HTTP POST for the model-server backends, standard library only.

What it guarantees, whatever the server does:

- a total deadline per request (connect, send, headers and body together): a server trickling a
  byte every few seconds times out like one that never answers;
- a cap on the response size, checked while reading, so a huge answer never fills memory;
- redirects are never followed: the bearer token never reaches a host it was not given for;
- every failure is a :class:`HttpFailure` saying whether it is *transient* (worth asking again on
  a later run: timeouts, refused or reset connections, HTTP 401/408/429/5xx, malformed responses)
  or definitive, with the API key scrubbed from its message.
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import json
import socket
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Dict, Optional, TypeVar

__all__ = ["HttpFailure", "ModelClient", "UnusableAnswer", "post_json", "retry_after_seconds", "scrub"]

#: Statuses worth another attempt, now or on a later run: the same request may succeed.
TRANSIENT_STATUSES = frozenset({401, 408, 409, 425, 429})


class HttpFailure(Exception):
    """A request that brought no usable JSON answer.

    ``transient``: asking again (now or on a later run) may succeed, so the failure must not be
    cached; ``retry_after``: seconds the server asked to wait (429/503), if it did."""

    def __init__(self, message: str, transient: bool, retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


def scrub(text: str, secret: Optional[str]) -> str:
    """``text`` with every occurrence of ``secret`` (an API key) masked."""
    if secret:
        text = text.replace(secret, "***")
    return text


def _read_limited(response: http.client.HTTPResponse, limit: int, deadline: float, sock) -> bytes:
    """The body, read in pieces while the deadline holds and the size stays under ``limit``."""
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise HttpFailure(f"response of {int(declared)} bytes exceeds the {limit}-byte cap", transient=False)
    pieces = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        if sock is not None:
            sock.settimeout(remaining)
        piece = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
        if not piece:
            return b"".join(pieces)
        size += len(piece)
        if size > limit:
            raise HttpFailure(f"response exceeds the {limit}-byte cap", transient=False)
        pieces.append(piece)


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """The wait a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None when it
    is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": RFC 5322's UTC of unknown origin
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - time.time())


def post_json(
    url: str,
    payload: Dict[str, object],
    api_key: Optional[str],
    timeout: float,
    max_response_bytes: int,
) -> dict:
    """POST ``payload`` as JSON to ``url`` and return the decoded JSON object of a 2xx answer.

    ``timeout`` bounds the whole exchange. Raises :class:`HttpFailure` for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpFailure(
            f"unsupported URL {url!r}: http:// or https:// with a host expected", transient=False
        )
    body = json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    deadline = time.monotonic() + timeout
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_type(parts.hostname, parts.port, timeout=timeout)
    try:
        try:
            connection.request("POST", path, body=body, headers=headers)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout()
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            response = connection.getresponse()
            raw = _read_limited(response, max_response_bytes, deadline, connection.sock)
        except (socket.timeout, TimeoutError):
            raise HttpFailure(f"timed out after {timeout:g} s", transient=True) from None
        except (ConnectionError, OSError) as err:
            raise HttpFailure(f"connection failed: {scrub(str(err), api_key)}", transient=True) from None
        except (http.client.HTTPException, ValueError) as err:
            # A bad status line, truncated chunked body, broken headers: the server or the network
            # misbehaved; a later attempt may well get a proper answer.
            reason = scrub(f"{type(err).__name__}: {err}", api_key)[:200]
            raise HttpFailure(f"malformed HTTP response ({reason})", transient=True) from None
        status = response.status
        if 300 <= status < 400:
            raise HttpFailure(
                f"HTTP {status}: the server redirects (to {response.getheader('Location')!r}); redirects are "
                "not followed, so that the API key never reaches another host: use the final URL as --base-url",
                transient=False,
            )
        if status >= 400:
            detail = scrub(raw[:200].decode("utf-8", "replace"), api_key)
            retry_after = (
                retry_after_seconds(response.getheader("Retry-After")) if status in (429, 503) else None
            )
            transient = status in TRANSIENT_STATUSES or status >= 500
            raise HttpFailure(f"HTTP {status}: {detail}", transient=transient, retry_after=retry_after)
        try:
            reply = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise HttpFailure(f"malformed response body: {err}", transient=True) from None
        if not isinstance(reply, dict):
            raise HttpFailure("malformed response body: not a JSON object", transient=True)
        return reply
    finally:
        connection.close()


class UnusableAnswer(Exception):
    """A well-formed reply whose content cannot be used (e.g. no permutation in it): the model's
    own answer, so definitive, but worth asking again at once while retries remain."""


Value = TypeVar("Value")


@dataclass
class Attempts:
    """What asking took: ``calls`` requests sent, tokens the server reported using."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _token_count(usage: object, name: str) -> int:
    """A token count from a reply's ``usage``; anything but a non-negative integer counts 0, so a
    server's odd accounting (``"usage": "lots"``) never fails an answer."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class ModelClient:
    """Requests to an OpenAI-compatible server with retries and exponential backoff.

    ``retries`` extra attempts follow a transient failure or an unusable answer; ``backoff``
    seconds before the first, doubled each time; a 429/503's ``Retry-After`` makes the wait that
    long if longer; never more than ``max_backoff``."""

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str],
        timeout: float,
        retries: int,
        backoff: float,
        max_backoff: float,
        max_response_bytes: int,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_response_bytes = max_response_bytes

    def ask(
        self, endpoint: str, payload: Dict[str, object], read: Callable[[dict], Value], attempts: Attempts
    ) -> Value:
        """``read(reply)`` of the first usable reply to ``payload`` at ``endpoint`` (e.g.
        ``/chat/completions``). ``read`` raises :class:`UnusableAnswer` (or KeyError, IndexError,
        TypeError, ValueError, ArithmeticError for a reply of the wrong shape or values) to ask again. After the last attempt:
        raises the last :class:`HttpFailure`, or :class:`UnusableAnswer` when the server answered."""
        url = self.base_url + endpoint
        retry_after: Optional[float] = None
        failure: Exception = HttpFailure("no attempt made", transient=True)
        for attempt in range(self.retries + 1):
            if attempt:
                wait = max(self.backoff * 2 ** (attempt - 1), retry_after or 0.0)
                time.sleep(min(wait, self.max_backoff))
            attempts.calls += 1
            try:
                reply = post_json(url, payload, self.api_key, self.timeout, self.max_response_bytes)
            except HttpFailure as err:
                failure, retry_after = err, err.retry_after
                if not err.transient:
                    raise
                continue
            usage = reply.get("usage")
            attempts.prompt_tokens += _token_count(usage, "prompt_tokens")
            attempts.completion_tokens += _token_count(usage, "completion_tokens")
            try:
                return read(reply)
            except UnusableAnswer as err:
                failure, retry_after = UnusableAnswer(scrub(str(err), self.api_key)), None
            except (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError) as err:
                message = scrub(f"malformed response: {type(err).__name__}: {err}", self.api_key)[:200]
                failure, retry_after = HttpFailure(message, transient=True), None
        raise failure
