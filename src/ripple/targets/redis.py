"""The Redis target: S3 event messages into one Redis key, as a stream or as a namespace hash.

`format="stream"` (the default) appends each delivery to the stream `key` with `XADD`;
`format="namespace"` keeps each object's newest event in the hash `key`, and a Lua script
applies an event only if its sequencer is at least the one stored in `<key>:sequencer`,
atomically, so an older event redelivered after a newer one never brings back an overwritten
or deleted state. One client (a pool: a connection per concurrent `publish`) is kept from
`open()` to `close()`; a batch goes in pipelines (no MULTI), answered in input order, and the
client never retries by itself. Each new connection asks the destination guard
(`ripple.targets.guard`) first and connects to an address it checked.

Commands, arguments and outcomes: docs/targets.md, "Redis".
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import redis
import redis.exceptions as rx
from redis.backoff import NoBackoff
from redis.retry import Retry

from ripple.events.keys import decode_key
from ripple.notifications.arguments import positive, whole
from ripple.notifications.endpoints import Endpoint
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationRefused, default_guard

__all__ = [
    "RedisConfig",
    "RedisFormat",
    "RedisTarget",
    "from_arguments",
    "namespace_field",
    "sequencer_key",
]

RedisFormat = Literal["stream", "namespace"]
_FORMATS: tuple[str, ...] = get_args(RedisFormat)
_CHUNK = 1000  # commands per pipeline round trip: bounds memory and what a failure costs
_HEX = re.compile(r"^[0-9A-Fa-f]+$")
# Server states that pass: the command is worth sending again later.
_TRANSIENT = (
    rx.OutOfMemoryError,
    rx.ReadOnlyError,
    rx.NoScriptError,
    rx.TryAgainError,
    rx.ClusterDownError,
)
_TRANSIENT_CODES = ("BUSY", "LOADING", "MASTERDOWN")

# KEYS[1]: field -> latest message; KEYS[2]: field -> its sequencer.
# ARGV: field, sequencer (hex), "set" or "del", message. Applies the event unless the stored
# sequencer is greater (compared as hexadecimal numbers); returns 1 if applied, 0 if older.
_NAMESPACE_SCRIPT = """
local function number(s)
  s = string.gsub(string.upper(s), '^0+', '')
  return s
end
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if stored then
  local old, new = number(stored), number(ARGV[2])
  if #new < #old or (#new == #old and new < old) then
    return 0
  end
end
if ARGV[3] == 'del' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class RedisConfig:
    """Where and how to write; `ValueError` (one line, naming the field) if a value is wrong."""

    key: str  # the stream, or the namespace hash
    format: RedisFormat = "stream"
    maxlen: int = 100_000  # the stream is trimmed to about this many entries (MAXLEN ~)
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = 5.0  # to connect, and for each socket read or write

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("key must not be empty")
        if self.format not in _FORMATS:
            raise ValueError(f"format must be one of {', '.join(_FORMATS)}, not {self.format!r}")
        if self.maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, not {self.maxlen}")
        if not self.host:
            raise ValueError("host must not be empty")
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be a number from 1 to 65535, not {self.port}")
        if self.db < 0:
            raise ValueError(f"db must be 0 or more, not {self.db}")
        if not self.timeout_s > 0:
            raise ValueError(
                f"timeout_s must be a positive number of seconds, not {self.timeout_s}"
            )

    @property
    def where(self) -> str:
        """The server and database, for errors and logs (never the password)."""
        return f"redis://{self.host}:{self.port}/{self.db}"


def sequencer_key(key: str) -> str:
    """The hash beside a namespace hash that holds each field's sequencer."""
    return f"{key}:sequencer"


def namespace_field(delivery: Delivery) -> str:
    """`<bucket>/<object key>`, the key decoded (the event carries it URL-encoded)."""
    return f"{delivery.bucket}/{decode_key(delivery.key)}"


class RedisTarget:
    """Writes deliveries to one Redis key; see the module docstring for the formats."""

    def __init__(self, config: RedisConfig, name: str | None = None) -> None:
        self.config = config
        self.name = name if name is not None else config.key
        self._client: redis.Redis | None = None
        self._script: Any = None  # redis.commands.core.Script (EVALSHA, loaded when missing)

    def open(self) -> None:
        if self._client is not None:
            return
        c = self.config
        client = redis.Redis(
            host=c.host,
            port=c.port,
            db=c.db,
            username=c.username,
            password=c.password,
            socket_timeout=c.timeout_s,
            socket_connect_timeout=c.timeout_s,
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),  # the pipeline retries, with backoff
        )
        client.connection_pool.connection_class = _GuardedConnection
        self._script = client.register_script(_NAMESPACE_SCRIPT)
        self._client = client  # connects on the first publish: a server down does not stop us

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        client = self._client
        if client is None:
            raise RuntimeError(f"Redis target {self.name!r} is not open: call open() first")
        results: list[Result] = []
        for start in range(0, len(deliveries), _CHUNK):
            answered, failure = self._send(client, deliveries[start : start + _CHUNK])
            results.extend(answered)
            if failure is not None:  # the connection failed: the rest is not tried now
                results.extend([failure] * (len(deliveries) - len(results)))
                break
        return results

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _send(
        self, client: redis.Redis, chunk: Sequence[Delivery]
    ) -> tuple[list[Result], Result | None]:
        """Send one pipeline; its results, or (nothing, the failure) if the connection failed."""
        answers: list[Result | None] = []  # None: the pipeline answers it
        with client.pipeline(transaction=False) as pipe:
            for delivery in chunk:
                answers.append(self._queue(pipe, delivery))
            if all(a is not None for a in answers):
                return [a for a in answers if a is not None], None
            try:
                replies = iter(pipe.execute(raise_on_error=False))
            except rx.RedisError as e:
                return [], self._failure(e)
            except DestinationRefused as e:
                return [], Result(Outcome.PERMANENT, one_line(e))
        return [a if a is not None else self._reply(next(replies)) for a in answers], None

    def _queue(self, pipe: Any, delivery: Delivery) -> Result | None:
        """Add the delivery's command to the pipeline, or answer at once if it has none."""
        c = self.config
        if c.format == "stream":
            fields = {"event_id": delivery.event_id, "event": delivery.body}
            pipe.xadd(c.key, fields, maxlen=c.maxlen, approximate=True)
            return None
        try:
            event = delivery.event
            sequencer = str(event["s3"]["object"]["sequencer"])
            event_name = str(event["eventName"])
            removed = event_name.startswith("ObjectRemoved:")
            if not removed and not event_name.startswith("ObjectCreated:"):
                # tagging (of any version, current or not) changes no object's state here
                return OK
            name = namespace_field(delivery)
        except (KeyError, TypeError, ValueError) as e:
            error = f"{type(e).__name__}: {one_line(e)}"
            return Result(Outcome.PERMANENT, f"not an S3 event record ({error})")
        if not _HEX.match(sequencer):
            return Result(Outcome.PERMANENT, f"sequencer {sequencer!r} is not hexadecimal")
        args = [name, sequencer, "del" if removed else "set", b"" if removed else delivery.body]
        self._script(keys=[c.key, sequencer_key(c.key)], args=args, client=pipe)
        return None

    def _reply(self, reply: object) -> Result:
        if not isinstance(reply, rx.ResponseError):
            return OK  # a stream entry id, or the script's 1 (applied) / 0 (older: skipped)
        code = reply.status_code or str(reply).partition(" ")[0]
        error = f"{_text(reply)} ({self.config.where})"
        if isinstance(reply, _TRANSIENT) or code in _TRANSIENT_CODES:
            return Result(Outcome.RETRY, error)
        return Result(Outcome.PERMANENT, error)

    def _failure(self, e: rx.RedisError) -> Result:
        where, timeout = self.config.where, self.config.timeout_s
        if isinstance(e, rx.AuthenticationError | rx.AuthorizationError):
            return Result(Outcome.PERMANENT, f"authentication refused by {where}: {_text(e)}")
        if isinstance(e, rx.TimeoutError):
            return Result(Outcome.RETRY, f"timed out after {timeout:g}s: {where}")
        if isinstance(e, rx.ConnectionError):
            if isinstance(e.__context__, ConnectionRefusedError) or "refused" in str(e).lower():
                return Result(Outcome.RETRY, f"connection refused: {where}")
            return Result(Outcome.RETRY, f"connection to {where} broken: {_text(e)}")
        if isinstance(e, rx.ResponseError):  # e.g. NOPERM on SCRIPT LOAD, before the pipeline
            return self._reply(e)
        return Result(Outcome.RETRY, f"{type(e).__name__} from {where}: {_text(e)}")


class _GuardedConnection(redis.Connection):
    """A connection that asks the destination guard first and connects to an address it
    checked (redis-py would resolve the name again)."""

    def _connect(self) -> socket.socket:
        name = self.host
        error: OSError | None = None
        try:
            for address in default_guard().check_address(name, self.port):
                self.host = address  # what the base class connects to
                try:
                    sock: socket.socket = super()._connect()  # type: ignore[no-untyped-call]
                except OSError as e:
                    error = e
                else:
                    return sock
        finally:
            self.host = name  # for its error messages
        if error is None:
            raise OSError(f"{name} resolved to no address")
        raise error


def _text(e: rx.RedisError) -> str:
    """The server's error line, with the code redis-py takes off put back in front."""
    text = one_line(e)
    code = e.status_code
    return f"{code} {text}" if code and not text.startswith(code) else text


_ARGUMENTS = ("redis-key", "redis-format", "redis-maxlen", "timeout")


def from_arguments(name: str, endpoint: Endpoint, arguments: Mapping[str, str]) -> RedisTarget:
    """A Redis target named `name` writing to `endpoint` (redis://[[user]:password@]host[:port]
    [/db]), from string arguments: `redis-key` (required), `redis-format` (stream | namespace),
    `redis-maxlen` (stream entries kept, about), `timeout` (seconds). A wrong, missing or
    unknown argument raises `ValueError` naming it."""
    try:
        return RedisTarget(_config(endpoint, arguments), name=name)
    except ValueError as e:
        raise ValueError(f"Redis topic {name!r}: {e}") from None


def _config(endpoint: Endpoint, arguments: Mapping[str, str]) -> RedisConfig:
    if endpoint.scheme != "redis":
        raise ValueError(f"endpoint {endpoint.redacted!r} is not redis://host[:port][/db]")
    for arg in arguments:
        if arg not in _ARGUMENTS:
            raise ValueError(f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}")
    key = arguments.get("redis-key")
    if key is None:
        raise ValueError("argument 'redis-key' is required: the stream or hash to write to")
    if not key.strip():
        raise ValueError("argument 'redis-key' must not be empty")
    raw_format = arguments.get("redis-format", "stream")
    if raw_format not in _FORMATS:
        raise ValueError(
            f"argument 'redis-format' must be one of {', '.join(_FORMATS)}, not {raw_format!r}"
        )
    format_: RedisFormat = "stream" if raw_format == "stream" else "namespace"
    maxlen = 100_000
    if "redis-maxlen" in arguments:
        if format_ != "stream":
            raise ValueError("argument 'redis-maxlen' applies only to redis-format=stream")
        maxlen = whole("redis-maxlen", arguments["redis-maxlen"])
    timeout_s = positive("timeout", arguments["timeout"]) if "timeout" in arguments else 5.0
    return RedisConfig(
        key=key,
        format=format_,
        maxlen=maxlen,
        host=endpoint.host,
        port=endpoint.port,
        db=int(endpoint.path or "0"),
        username=endpoint.username or None,
        password=endpoint.password,
        timeout_s=timeout_s,
    )
