"""`bm publish` and `bm worker`: turns through a broker (Redis Streams, or a local directory
queue) into one store per user (sync/broker.py, sync/broker_worker.py)."""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Optional

import typer

from .common import JsonOpt, open_input, option
from .output import emit, info, kv_table, wants_json

CHUNK = 500  # lines published in one MULTI (all of a chunk or none)


def _check_url(value: str) -> str:
    from brandmind.errors import InvalidInput

    if not value or not value.strip():
        raise InvalidInput("the broker URL is empty", hint="e.g. --broker redis://127.0.0.1:6379")
    return value


def _check_name(value: str) -> str:
    from brandmind.errors import InvalidInput

    if not re.fullmatch(r"[A-Za-z0-9._@-]{1,64}", value) or value.startswith("."):
        raise InvalidInput(f"invalid name {value!r}",
                           hint="1-64 characters: letters, digits, '.', '_', '@', '-' (not starting with '.')")
    return value


BrokerOpt = Annotated[str, option("--broker", "-b", check=_check_url,
                                  help="Where the events go: redis://[:PASSWORD@]HOST:PORT (Redis or Valkey), "
                                       "or file:///DIR (a queue in a local directory, no server).")]
ShardsOpt = Annotated[Optional[int], typer.Option(
    "--shards", min=1, max=1024, help="Shard streams (users are spread over them; one worker reads a shard at a "
                                      "time). Fixed when the broker is first used; default 16.")]
PrefixOpt = Annotated[str, option("--prefix", check=_check_name,
                                  help="Prefix of the broker's keys (several bm brokers on one Redis).")]


def publish(
    path: Annotated[str, typer.Argument(help="JSONL turns (the format of `bm ingest`), or - for stdin.")],
    broker: BrokerOpt,
    user: Annotated[str, option("--user", "-u", help="Whose turns these are (the worker stores them in that "
                                                     "user's store).", check=lambda v: _check_user(v))],
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Report bad lines and go on instead of stopping.")] = False,
    retry_for: Annotated[float, typer.Option("--retry-for", min=0, max=3600,
                                             help="Seconds to keep retrying while Redis cannot be reached "
                                                  "(restarting, a network blip) before failing.")] = 30.0,
    shards: ShardsOpt = None,
    prefix: PrefixOpt = "bm",
    as_json: JsonOpt = False,
) -> None:
    """Publish turns to a broker for `bm worker` to store: one event per line, in order.

    Each line is checked as `bm ingest` reads it; a bad line stops the publish (exit 1) after
    the lines before it were published (--skip-bad reports it and goes on).  A turn without an
    "id" gets the event's id, so a worker that gets it twice stores it once.  From Python, an
    agent does the same after each turn with
    brandmind.sync.broker.open_broker(URL).publish(USER, [turn]).

    \b
    Examples:
      echo '{"role": "user", "content": "I moved to Lisbon"}' | bm publish - -b redis://127.0.0.1:6379 -u ann
      bm publish chat.jsonl --broker file:///var/lib/bm-queue -u ann
    """
    from brandmind.sync.broker import open_broker

    with open_input(path) as fh, open_broker(broker, shards=shards, prefix=prefix, retry_for=retry_for) as b:
        report = _publish_lines(b, fh, user, skip_bad)
    for bad in report["bad"]:
        info(f"skipped line {bad['line']}: {bad['error']}")
    if wants_json(as_json):
        print(json.dumps(report))
    else:
        info(f"published {report['published']} turn(s) for {user}, {len(report['bad'])} bad line(s) skipped")


def _publish_lines(b: Any, lines: Any, user: str, skip_bad: bool) -> dict:
    """Publish JSONL lines CHUNK at a time; a bad line stops it after the lines before it
    were published (``skip_bad``: reported and skipped)."""
    from brandmind.errors import InvalidInput
    from brandmind.ingest import parse_message

    report: dict = {"published": 0, "bad": [], "lines": 0, "first": None, "last": None}
    chunk: list[dict] = []

    def flush() -> None:
        if chunk:
            ids = b.publish(user, chunk)
            report["published"] += len(ids)
            report["first"] = report["first"] or ids[0]
            report["last"] = ids[-1]
            chunk.clear()

    for lineno, line in enumerate(lines, 1):
        report["lines"] = lineno
        try:
            msg = parse_message(line, lineno)
        except InvalidInput as exc:
            if not skip_bad:
                flush()
                exc.message += f" — {report['published']} turn(s) before it were published"
                raise
            report["bad"].append({"line": lineno, "error": exc.message})
            continue
        if msg is not None:
            chunk.append({k: v for k, v in msg.items() if v not in (None, {})})
            if len(chunk) >= CHUNK:
                flush()
    flush()
    return report


def _check_user(value: str) -> str:
    from brandmind.sync.broker import check_user

    return check_user(value)


# long: 14 options, one a line; the body is short
def worker(
    broker: BrokerOpt,
    root: Annotated[str, typer.Option("--root", help="Directory of the users' stores: ROOT/<user> is an ordinary bm "
                                                     "home (BM_HOME=ROOT/<user> bm recall ...).")],
    drain: Annotated[bool, typer.Option("--drain", help="Exit once no event is waiting or pending on any shard "
                                                        "(after taking over what dead workers left).")] = False,
    claim_idle: Annotated[float, typer.Option("--claim-idle", min=0.2, max=3600,
                                              help="Seconds a worker may go without renewing its leases before "
                                                   "another takes over its shards and the events it left pending.")] = 30.0,
    extract: Annotated[bool, typer.Option("--extract", help="Also extract facts from each user's turns "
                                                            "(config `extractor`) before acking them.")] = False,
    batch: Annotated[int, typer.Option("--batch", min=1, max=10000, help="Events read a round (spread over the shards held).")] = 256,
    group: Annotated[str, option("--group", check=_check_name, help="Consumer group (workers of one group share "
                                                                    "the events; each group gets every event).")] = "bm-workers",
    name: Annotated[Optional[str], option("--name", check=_check_name,
                                          help="This worker's consumer name (default: host-pid-random).")] = None,
    sync: Annotated[Optional[str], typer.Option("--sync", help="Sync each user's store to S3 at s3://BUCKET/PREFIX/<user> "
                                                               "(needs --sync-key): a new machine restores a user's "
                                                               "store from there before storing their turns.")] = None,
    sync_key: Annotated[Optional[str], typer.Option("--sync-key", help="The fleet's sync key (a file from `bm sync key "
                                                                       "export`), the same on every worker machine.")] = None,
    sync_endpoint_url: Annotated[Optional[str], typer.Option("--sync-endpoint-url", help="An S3-compatible server, "
                                                                                         "e.g. http://127.0.0.1:8333.")] = None,
    sync_profile: Annotated[Optional[str], typer.Option("--sync-profile", help="A profile of ~/.aws/config for the "
                                                                               "credentials (default: the usual AWS chain).")] = None,
    sync_every: Annotated[float, typer.Option("--sync-every", min=0, max=86400, help="Seconds between pushes of one "
                                                                                     "user's store; its events are acked "
                                                                                     "once pushed.")] = 30.0,
    shards: ShardsOpt = None,
    prefix: PrefixOpt = "bm",
    as_json: JsonOpt = False,
) -> None:
    """Store the events of a broker in one bm store per user, until stopped (SIGTERM or Ctrl-C
    finish the round under way) or, with --drain, until nothing is left.

    Each user's turns are stored in order in ROOT/<user> (ids other than lower-case letters,
    digits, '-', '_' and '@' are %XX-escaped: Ann -> %41nn), embedded, with --extract their
    facts extracted, and acked only once committed.  Run several workers on one ROOT: each
    holds a share of the shards (a user's events are read by one worker at a time, in
    order; for several machines see the README).  With --sync each user's store is synced to
    S3 (pushed every --sync-every seconds and at exit, events acked once pushed), and a worker
    on a new machine restores a store from S3 before storing its user's turns.  A malformed event goes
    to the dead-letter stream (redis-cli XRANGE bm:dead - +).  Prints a report when it ends,
    and one JSON line of the counters so far on SIGUSR1 (kill -USR1 PID).

    \b
    Examples:
      bm worker --broker redis://127.0.0.1:6379 --root /srv/bm-users
      bm worker -b redis://127.0.0.1:6379 --root /srv/bm-users --drain --claim-idle 5
      bm worker -b redis://10.0.0.5:6379 --root /srv/bm-users --sync s3://my-bucket/bm-users --sync-key fleet.key
      BM_HOME=/srv/bm-users/ann bm recall "where does Ann live?"
    """
    import signal
    import threading
    from pathlib import Path

    from brandmind.sync.broker import open_broker
    from brandmind.sync.broker_worker import BrokerWorker

    stop, asked = threading.Event(), threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        signal.signal(signal.SIGUSR1, lambda *_: asked.set())
    fleet = _fleet_sync(sync, sync_key, sync_endpoint_url, sync_profile, sync_every)
    Path(root).mkdir(parents=True, exist_ok=True)
    with open_broker(broker, shards=shards, prefix=prefix) as b:
        w = BrokerWorker(b, root, group=group, name=name, batch=batch, claim_idle=claim_idle, extract=extract,
                         sync=fleet, log=info)
        info(f"worker {w.name}: {b.describe()}, {b.shards} shards, stores in {w.root}"
             + (f", synced to {fleet.describe()}" if fleet else ""))
        report = w.run(drain=drain, stop=stop, asked=asked, answer=lambda r: print(json.dumps(r), flush=True))
    if not wants_json(as_json):
        report.pop("lag_hist", None)
        report["lag_ms"] = " / ".join(f"{k} {v}" for k, v in report["lag_ms"].items())
    emit(report, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="bm worker"))


def _fleet_sync(url: str | None, key: str | None, endpoint_url: str | None, profile: str | None,
                every: float) -> Any:
    """The FleetSync of --sync (None without it); usage errors before anything starts."""
    from brandmind.errors import UsageError

    if url is None:
        if key or endpoint_url or profile:
            raise UsageError("--sync-key, --sync-endpoint-url and --sync-profile go with --sync",
                             hint="add --sync s3://BUCKET/PREFIX")
        return None
    if key is None:
        raise UsageError("--sync needs --sync-key FILE (the fleet's sync key, the same on every worker machine)",
                         hint="make it once: BM_HOME=$(mktemp -d) sh -c 'bm init >/dev/null && bm sync key export "
                              "-o fleet.key'")
    from brandmind.sync.broker_sync import FleetSync, parse_s3_url, read_key

    parse_s3_url(url)  # the URL before the key file
    return FleetSync(url, read_key(key), endpoint_url=endpoint_url, profile=profile, every=every)
