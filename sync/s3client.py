"""The object store under an S3 remote (boto3): requests, errors, encrypted documents.

:class:`S3Objects` is the public object API of a remote (``sync.remote.ObjectRemote``):
``get``/``put``/``delete``/``list_objects`` of names relative to the remote's prefix,
``read_doc``/``cas`` of encrypted JSON documents (compare-and-swap with If-Match), ``map``
over a few threads, and the server's clock (``clock_offset_ms``).  ``S3Remote`` (s3.py) adds
the op streams on top.  Every request error becomes a BMError (:class:`RemoteError`,
:class:`RemoteUnavailable`, ClockSkew) except a failed condition, :class:`Precondition`.
"""
from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

from brandmind.clock import CLOCK_HINT, now_millis, span
from brandmind.errors import BMError, ClockSkew, ConfigError
from brandmind.oplog import dumps
from brandmind.s3session import s3_client

from .config import RemoteConfig
from brandmind.crypto import Keyring
from .remote import RemoteDown

CAS_TRIES = 12
WORKERS = 4


class RemoteError(BMError):
    """The remote refused or failed a request (after botocore's own retries)."""


class RemoteUnavailable(RemoteError, RemoteDown):
    """The remote cannot be reached right now (network, timeouts, 5xx): try again later."""


class Precondition(Exception):
    """412 (or 409 on a conditional write): the condition did not hold."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def make_client(cfg: RemoteConfig) -> Any:
    """A boto3 S3 client for the remote (brandmind/s3session.py): credentials from the remote's
    config, else its profile, else the usual chain; path-style addressing for custom endpoints."""
    import botocore.exceptions

    creds: dict[str, Any] = {}
    if cfg.access_key_id and cfg.secret_access_key:
        creds = {"aws_access_key_id": cfg.access_key_id, "aws_secret_access_key": cfg.secret_access_key}
    try:
        return s3_client(endpoint_url=cfg.endpoint_url, region=cfg.region, profile=cfg.profile,
                         agent="brandmind-sync", addressing_style=cfg.addressing_style, credentials=creds,
                         tcp_keepalive=True)
    except botocore.exceptions.ProfileNotFound:
        raise ConfigError(f"remote {cfg.name!r}: AWS profile {cfg.profile!r} is not configured",
                          hint="add it to ~/.aws/config (`aws configure --profile NAME`) or "
                               f"`bm remote add s3 {cfg.name} --replace` without --profile") from None


class S3Objects:
    """The encrypted objects of one remote (see the module docstring)."""

    def __init__(self, cfg: RemoteConfig, keyring: Keyring, *, client: Any = None) -> None:
        self.name = cfg.name
        self.cfg = cfg
        self.keyring = keyring
        self._client = client
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "bytes_up": 0, "bytes_down": 0, "already_pushed": 0}
        self.clock_sample: tuple[int, int] | None = None  # (this clock - the server's, round trip) ms

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.cfg)
        return self._client

    def key(self, rel: str) -> str:
        return f"{self.cfg.prefix}/{rel}" if self.cfg.prefix else rel

    def where(self, rel: str) -> str:
        return f"s3://{self.cfg.bucket}/{self.key(rel)}"

    def call(self, what: str, fn: Callable[..., Any], **kw: Any) -> Any:
        """One S3 request (botocore retries transient failures itself); errors become BMErrors."""
        import botocore.exceptions as bx

        self.stats["requests"] += 1
        t0 = now_millis()
        try:
            resp = fn(Bucket=self.cfg.bucket, **kw)
            self._saw_date(resp, t0)
            return resp
        except bx.ClientError as exc:
            self._saw_date(exc.response, t0)
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "RequestTimeTooSkewed":
                off = self.clock_offset_ms()
                how = (f"{span(off)} {'ahead of' if off > 0 else 'behind'}" if off is not None
                       else "too far from")
                raise ClockSkew(f"remote {self.name!r} refused to {what}: this device's clock is {how} "
                                "the S3 server's (RequestTimeTooSkewed)", hint=CLOCK_HINT) from None
            if status == 412 or code == "PreconditionFailed":
                raise Precondition(412) from None
            if status == 409 and code in ("ConditionalRequestConflict", "OperationAborted"):
                raise Precondition(409) from None
            if code in ("NoSuchKey", "404", "NotFound"):
                raise KeyError(kw.get("Key")) from None
            if code == "NoSuchBucket":
                raise RemoteError(f"remote {self.name!r}: bucket {self.cfg.bucket!r} does not exist",
                                  hint="create it (e.g. `aws s3 mb s3://BUCKET`) or fix it with "
                                       f"`bm remote add s3 {self.name} --replace --bucket B`") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403",
                        "InvalidToken", "ExpiredToken", "AllAccessDisabled"):
                raise RemoteError(f"remote {self.name!r}: access denied when trying to {what} ({code})",
                                  hint="check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                                       "--profile, or the remote's access_key_id) and the bucket policy") from None
            if status is not None and status >= 500:
                raise RemoteUnavailable(f"remote {self.name!r} failed to {what}: HTTP {status} {code}",
                                        hint="a server-side problem; nothing is lost (the local op log "
                                             "keeps every op): sync again later") from None
            raise RemoteError(f"remote {self.name!r} refused to {what}: {code or status} "
                              f"{err.get('Message', '')}".rstrip(),
                              hint="check the remote with `bm remote test`") from None
        except bx.NoCredentialsError:
            raise RemoteError(f"remote {self.name!r}: no AWS credentials found",
                              hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use "
                                   f"`bm remote add s3 {self.name} --replace --profile NAME ...`") from None
        except (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                bx.ConnectTimeoutError, bx.ConnectionError, bx.HTTPClientError) as exc:
            raise RemoteUnavailable(f"cannot reach remote {self.name!r} ({self.cfg.endpoint_url or 'AWS S3'}) "
                                    f"to {what}: {exc}",
                                    hint="check the network and the endpoint URL; nothing is lost "
                                         "(the local op log keeps every op): sync again later") from None

    def _saw_date(self, resp: Any, t0: int) -> None:
        """Compare this device's clock with the server's ``Date`` header (1 s resolution:
        the server's time is taken as the middle of that second, ours as the middle of the
        request)."""
        from email.utils import parsedate_to_datetime

        headers = (resp or {}).get("ResponseMetadata", {}).get("HTTPHeaders") or {}
        date = headers.get("date")
        if not date:
            return
        try:
            server = int(parsedate_to_datetime(date).timestamp() * 1000) + 500
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        t1 = now_millis()
        self.clock_sample = ((t0 + t1) // 2 - server, t1 - t0)

    def clock_offset_ms(self) -> int | None:
        """How far this device's clock is ahead of the server's (negative: behind), from the
        last answer, or None before any answer."""
        return self.clock_sample[0] if self.clock_sample else None

    def get(self, rel: str) -> tuple[bytes, str] | None:
        """(body, etag) of an object, or None when it does not exist."""
        import botocore.exceptions as bx

        try:
            resp = self.call(f"read {rel}", self.client.get_object, Key=self.key(rel))
        except KeyError:
            return None
        try:
            body = resp["Body"].read()
        except (bx.BotoCoreError, OSError) as exc:
            raise RemoteUnavailable(f"reading {self.where(rel)} was cut off: {exc}",
                                    hint="sync again; nothing is lost") from None
        self.stats["bytes_down"] += len(body)
        return body, resp.get("ETag", "")

    def put(self, rel: str, body: bytes, **cond: str) -> str:
        """PUT with a condition (IfNoneMatch='*' or IfMatch=etag); raises Precondition."""
        resp = self.call(f"write {rel}", self.client.put_object, Key=self.key(rel), Body=body, **cond)
        self.stats["bytes_up"] += len(body)
        return resp.get("ETag", "")

    def list_objects(self, prefix_rel: str, *, start_after_rel: str | None = None,
              delimiter: str | None = None) -> Iterator[dict]:
        kw: dict[str, Any] = {"Prefix": self.key(prefix_rel)}
        if start_after_rel is not None:
            kw["StartAfter"] = self.key(start_after_rel)
        if delimiter:
            kw["Delimiter"] = delimiter
        token = None
        while True:
            if token:
                kw["ContinuationToken"] = token
            resp = self.call(f"list {prefix_rel}", self.client.list_objects_v2, **kw)
            yield from resp.get("Contents", [])
            for cp in resp.get("CommonPrefixes", []):
                yield {"Prefix": cp["Prefix"]}
            if not resp.get("IsTruncated"):
                return
            token = resp.get("NextContinuationToken")

    def rel_of(self, full: str) -> str:
        p = self.cfg.prefix
        return full[len(p) + 1:] if p and full.startswith(p + "/") else full

    # -- encrypted documents ------------------------------------------------------------------
    def read_doc(self, rel: str) -> tuple[dict | None, str | None]:
        got = self.get(rel)
        if got is None:
            return None, None
        body, etag = got
        try:
            return json.loads(self.keyring.open(rel, body, where=self.where(rel))), etag
        except ValueError:
            raise RemoteError(f"{self.where(rel)} is not valid JSON after decryption",
                              hint="the object is damaged; delete it and sync again") from None

    def cas(self, rel: str, merge: Callable[[dict | None], dict]) -> dict:
        """Compare-and-swap a shared document: read, merge, write If-Match (or If-None-Match
        when absent); on 412/409 re-read and merge again."""
        for attempt in range(CAS_TRIES):
            doc, etag = self.read_doc(rel)
            new = merge(doc)
            if doc is not None and new == doc:
                return doc
            body = self.keyring.seal(rel, dumps(new))
            try:
                self.put(rel, body, **({"IfMatch": etag} if etag else {"IfNoneMatch": "*"}))
                return new
            except Precondition:
                time.sleep(min(1.0, 0.02 * 2 ** attempt) * random.random())
        raise RemoteUnavailable(f"{self.where(rel)} kept changing under {CAS_TRIES} attempts to update it",
                                hint="many devices are syncing at once; sync again in a moment")


    def delete(self, rel: str) -> None:
        """Delete an object (absent is fine: S3 answers 204 either way)."""
        self.call(f"delete {rel}", self.client.delete_object, Key=self.key(rel))

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
        """``map`` over a few threads (boto3 clients are thread-safe), results in order."""
        items = list(items)
        if len(items) <= 1:
            yield from map(fn, items)
            return
        self.client  # make it once, before the threads
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
            yield from pool.map(fn, items)

