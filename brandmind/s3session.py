"""The boto3 S3 clients bm makes: a sync remote's (``sync/s3client.py``) and the workspace's on
S3 (``workspace_bucket.py``).

One boto3 session per AWS profile and environment in a process (a new session loads the S3
service model again, ~0.3 s, and a daemon or a test opens remotes often); clients with the
usual chain's credentials (or the caller's), path-style addressing and lenient checksums for
custom endpoints (S3-compatible servers differ in their support of the newer checksums).
A missing profile raises botocore's ``ProfileNotFound``: each caller words its own error.
"""
from __future__ import annotations

import os
import threading
from typing import Any

_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE", "AWS_DEFAULT_REGION", "AWS_REGION")
_SESSIONS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def env_key() -> tuple:
    """The AWS settings of the environment that a session depends on."""
    return tuple(os.environ.get(k) for k in _ENV)


def session(profile: str | None) -> Any:
    """This process's boto3 session for ``profile`` (None: the usual chain) and the environment."""
    import boto3

    key = (profile, env_key())
    with _LOCK:
        if key not in _SESSIONS:
            _SESSIONS[key] = boto3.session.Session(profile_name=profile) if profile else boto3.session.Session()
        return _SESSIONS[key]


def s3_client(*, endpoint_url: str | None, region: str | None, profile: str | None, agent: str,
              addressing_style: str | None = None, credentials: dict[str, Any] | None = None,
              tcp_keepalive: bool = False) -> Any:
    """A boto3 S3 client (see the module docstring); ``credentials``: ``aws_access_key_id`` and
    ``aws_secret_access_key`` given by the caller instead of the session's."""
    from botocore.config import Config

    sess = session(profile)
    options: dict[str, Any] = dict(
        s3={"addressing_style": addressing_style or ("path" if endpoint_url else "auto")},
        retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=60,
        max_pool_connections=16, user_agent_extra=agent)
    if tcp_keepalive:
        options["tcp_keepalive"] = True
    if endpoint_url:
        options.update(request_checksum_calculation="when_required", response_checksum_validation="when_required")
    region = region or sess.region_name or ("us-east-1" if endpoint_url else None)
    with _LOCK:  # a session makes clients one at a time
        return sess.client("s3", endpoint_url=endpoint_url, region_name=region, config=Config(**options),
                           **(credentials or {}))
