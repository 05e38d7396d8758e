"""The S3 side of the workspace on S3 (brandmind/workspace_s3.py): where it lives and its requests.

:class:`Location` is config ``workspace = "s3://BUCKET/PREFIX"`` with ``workspace_endpoint_url``,
``workspace_region`` and ``workspace_profile``; :func:`make_client` makes a boto3 client as sync
makes one (brandmind/s3session.py: the profile's or the usual chain's credentials, path-style
addressing and lenient checksums for custom endpoints), :func:`shared_client` keeps one per
endpoint and credentials for the process.  :class:`Bucket` sends the requests: every failure
becomes a BMError (:class:`WorkspaceUnavailable` for what may pass, network, timeouts and 5xx;
:class:`WorkspaceStorageError` for the rest), except a failed condition (:class:`Changed`), a
304 (:class:`NotModified`) and a missing object (KeyError, or None from ``get``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import BMError, ConfigError
from .s3session import env_key, s3_client

_CLIENTS: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.RLock()


class WorkspaceUnavailable(BMError):
    """The S3 workspace cannot be reached right now (network, timeouts, 5xx)."""


class WorkspaceStorageError(BMError):
    """The S3 server refused a request, or holds something this store cannot read."""


class Changed(Exception):
    """412 or 409 on a conditional write: the manifest changed first."""


class NotModified(Exception):
    """304 on a conditional GET: the manifest this process holds is current."""


@dataclass(frozen=True)
class Location:
    """Where a store's workspace lives on S3 (config ``workspace`` and ``workspace_*``)."""

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None

    @classmethod
    def of(cls, config: Any) -> "Location | None":
        """The configured S3 location, or None for the local directory."""
        url = getattr(config, "workspace", "local") or "local"
        if not url.startswith("s3://"):
            return None
        bucket, _, prefix = url[len("s3://"):].partition("/")
        return cls(bucket, prefix.strip("/"), getattr(config, "workspace_endpoint_url", "") or None,
                   getattr(config, "workspace_region", "") or None, getattr(config, "workspace_profile", "") or None)

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def url(self, rel: str = "") -> str:
        return f"s3://{self.bucket}/{self.key(rel)}"


def make_client(loc: Location) -> Any:
    """A boto3 S3 client as sync makes one (brandmind/s3session.py): the profile's or the usual
    chain's credentials, path-style addressing and lenient checksums for custom endpoints."""
    import botocore.exceptions

    try:
        return s3_client(endpoint_url=loc.endpoint_url, region=loc.region, profile=loc.profile,
                         agent="brandmind-workspace")
    except botocore.exceptions.ProfileNotFound:
        raise ConfigError(f"the workspace's AWS profile {loc.profile!r} is not configured",
                          hint="add it to ~/.aws/config (`aws configure --profile NAME`) or "
                               "`bm config set workspace_profile ''`") from None


def shared_client(loc: Location) -> Any:
    """One client per endpoint, region and credentials for the process (boto3 clients are
    thread-safe; making one costs 0.1-0.5 s)."""
    key = (loc.endpoint_url, loc.region, loc.profile, env_key())
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
    if client is None:
        client = make_client(loc)
        with _CLIENTS_LOCK:
            client = _CLIENTS.setdefault(key, client)
    return client


class Bucket:
    """The requests of a workspace location; every failure becomes a BMError (or Changed,
    NotModified, KeyError for a missing object)."""

    def __init__(self, loc: Location, client: Any = None) -> None:
        self.loc = loc
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = shared_client(self.loc)
        return self._client

    # long: one table of S3's failures, each with its own message and hint
    def call(self, what: str, fn: Callable[..., Any], **kw: Any) -> Any:
        import botocore.exceptions as bx

        where = self.loc.url()
        try:
            return fn(Bucket=self.loc.bucket, **kw)
        except bx.ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 304:
                raise NotModified() from None
            if status == 412 or code == "PreconditionFailed" or (
                    status == 409 and code in ("ConditionalRequestConflict", "OperationAborted")):
                raise Changed() from None
            if code in ("NoSuchKey", "404", "NotFound"):
                raise KeyError(kw.get("Key")) from None
            if code == "NoSuchBucket":
                raise WorkspaceStorageError(f"the workspace's bucket {self.loc.bucket!r} does not exist",
                                            hint="create it (e.g. `aws s3 mb s3://BUCKET`) or point the workspace "
                                                 "elsewhere: `bm config set workspace s3://BUCKET/PREFIX`") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "InvalidToken",
                        "ExpiredToken", "AllAccessDisabled"):
                raise WorkspaceStorageError(f"access denied to the workspace at {where} when trying to {what} ({code})",
                                            hint="check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                                                 "`bm config set workspace_profile NAME`) and the bucket policy") from None
            if status is not None and status >= 500:
                raise WorkspaceUnavailable(f"the workspace at {where} failed to {what}: HTTP {status} {code}",
                                           hint="a server-side problem; try again later") from None
            raise WorkspaceStorageError(f"the workspace at {where} refused to {what}: {code or status} "
                                        f"{err.get('Message', '')}".rstrip(),
                                        hint="check `bm config get workspace` and the bucket") from None
        except bx.NoCredentialsError:
            raise WorkspaceStorageError("no AWS credentials found for the workspace on S3",
                                        hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                                             "`bm config set workspace_profile NAME`") from None
        except (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                bx.ConnectTimeoutError, bx.ConnectionError, bx.HTTPClientError) as exc:
            raise WorkspaceUnavailable(f"cannot reach the workspace at {where} "
                                       f"({self.loc.endpoint_url or 'AWS S3'}) to {what}: {exc}",
                                       hint="check the network and `bm config get workspace_endpoint_url`; "
                                            "then try again") from None

    def get(self, rel: str, **cond: str) -> tuple[bytes, str] | None:
        """(body, etag), or None when there is no such object."""
        import botocore.exceptions as bx

        try:
            resp = self.call(f"read {rel}", self.client.get_object, Key=self.loc.key(rel), **cond)
        except KeyError:
            return None
        try:
            return resp["Body"].read(), resp.get("ETag", "")
        except (bx.BotoCoreError, OSError) as exc:
            raise WorkspaceUnavailable(f"reading {self.loc.url(rel)} was cut off: {exc}", hint="try again") from None

    def put(self, rel: str, body: bytes, **cond: str) -> str:
        return self.call(f"write {rel}", self.client.put_object, Key=self.loc.key(rel), Body=body,
                         **cond).get("ETag", "")

    def delete(self, rels: list[str]) -> None:
        for i in range(0, len(rels), 1000):
            batch = [{"Key": self.loc.key(r)} for r in rels[i:i + 1000]]
            self.call("delete objects", self.client.delete_objects, Delete={"Objects": batch, "Quiet": True})

    def list(self, prefix_rel: str, *, delimiter: str | None = None) -> Iterator[dict]:
        """The objects under a prefix (``{"Key", "LastModified", ...}``, keys relative to
        the location's prefix), or with a delimiter the common prefixes (``{"Prefix"}``)."""
        kw: dict[str, Any] = {"Prefix": self.loc.key(prefix_rel)}
        if delimiter:
            kw["Delimiter"] = delimiter
        cut = len(self.loc.key(""))
        while True:
            resp = self.call(f"list {prefix_rel or '/'}", self.client.list_objects_v2, **kw)
            for item in resp.get("Contents", []):
                yield {**item, "Key": item["Key"][cut:]}
            for cp in resp.get("CommonPrefixes", []):
                yield {"Prefix": cp["Prefix"][cut:]}
            if not resp.get("IsTruncated"):
                return
            kw["ContinuationToken"] = resp.get("NextContinuationToken")
