"""A directory-backed sync remote for tests: survives the process (so a daemon can be
killed with -9 and restarted), shared by several processes, with a push journal.

Layout under ``root``::

    ops/<replica>/<seq:012d>.json   one op per file, created once (link(2): if-none-match)
    heads/<replica>                 highest contiguous seq stored (written after the ops)
    journal.jsonl                   one line per push call: {"replica", "first", "last", "new", "same"}

Like S3 with ``If-None-Match: *``: an op file that already exists with the same op (id,
HLC, kind; the payload may have been redacted since) counts as already pushed (``same``);
another op under that id raises SyncConflict.  ``delay``
seconds are slept per push call and ``op_delay`` per op (to catch a daemon mid-step; a
``push-started`` file appears when a push begins); ``fail_every`` makes every
n-th request raise (a flaky remote) -- before or after it committed.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from brandmind.errors import BMError
from brandmind.replication import CLASH_HINT


def _dumps(op: dict) -> bytes:
    return json.dumps(op, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


class RemoteDown(BMError):
    """An injected failure of the test remote (like S3Remote's RemoteUnavailable)."""


class DirRemote:
    accepts_pushes_for_others = False

    def __init__(self, root: str | os.PathLike[str], *, name: str = "dir", delay: float = 0.0,
                 op_delay: float = 0.0, fail_every: int = 0) -> None:
        self.root = Path(root)
        self.name = name
        self.delay = delay
        self.op_delay = op_delay
        self.fail_every = fail_every
        self.requests = 0
        (self.root / "ops").mkdir(parents=True, exist_ok=True)
        (self.root / "heads").mkdir(parents=True, exist_ok=True)

    def _maybe_fail(self, where: str) -> None:
        self.requests += 1
        if self.fail_every and self.requests % self.fail_every == 0:
            raise RemoteDown(f"injected failure {where}")

    def heads(self) -> dict[str, int]:
        self._maybe_fail("in heads")
        out = {}
        for f in (self.root / "heads").iterdir():
            if not f.name.startswith("."):
                out[f.name] = int(f.read_text())
        return out

    def _head(self, replica: str) -> int:
        try:
            return int((self.root / "heads" / replica).read_text())
        except FileNotFoundError:
            return 0

    def push(self, replica: str, ops: list[dict]) -> int:
        from brandmind.errors import SyncConflict

        if ops:
            (self.root / "push-started").touch()
        if self.delay:
            time.sleep(self.delay)
        self._maybe_fail("before the push")
        folder = self.root / "ops" / replica
        folder.mkdir(parents=True, exist_ok=True)
        new = same = 0
        for op in ops:
            if self.op_delay:
                time.sleep(self.op_delay)
            seq = int(op["id"].rsplit(":", 1)[1])
            path = folder / f"{seq:012d}.json"
            body = _dumps(op)
            tmp = folder / f".{seq}.{os.getpid()}.tmp"
            tmp.write_bytes(body)
            try:
                os.link(tmp, path)
                new += 1
            except FileExistsError:
                there = json.loads(path.read_bytes())
                if (there["hlc"], there["kind"]) != (op["hlc"], op["kind"]):  # (a redaction is the same op)
                    raise SyncConflict(f"two devices share replica id {replica} (op {op['id']} differs)",
                                       hint=CLASH_HINT) from None
                same += 1
            finally:
                tmp.unlink()
        head = self._head(replica)
        while (folder / f"{head + 1:012d}.json").exists():
            head += 1
        htmp = self.root / "heads" / f".{replica}.{os.getpid()}.tmp"
        htmp.write_text(str(head))
        os.replace(htmp, self.root / "heads" / replica)
        if ops:
            line = json.dumps({"replica": replica, "first": ops[0]["id"], "last": ops[-1]["id"],
                               "new": new, "same": same}) + "\n"
            fd = os.open(self.root / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        self._maybe_fail("after the push committed")
        return head

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        self._maybe_fail("in pull")
        folder = self.root / "ops" / replica
        out = []
        seq = after + 1
        while limit is None or len(out) < limit:
            path = folder / f"{seq:012d}.json"
            if not path.exists():
                break
            out.append(json.loads(path.read_bytes()))
            seq += 1
        return out

    # -- for assertions ---------------------------------------------------------------
    def stored(self, replica: str) -> list[dict]:
        folder = self.root / "ops" / replica
        if not folder.exists():
            return []
        return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]

    def journal(self) -> list[dict]:
        path = self.root / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
