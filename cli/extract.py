"""How `bm ingest --extract [--dry-run]` and `bm remember --extract` report extraction."""
from __future__ import annotations

from typing import Any


def facts_summary(facts: dict, llm: dict | None, extract: dict | None) -> str:
    """ "facts: 3 added, 1 confirmed, 0 updated, 0 contradicted (LLM: 2 calls, 3100 tokens)"."""
    if extract and "queued" in extract:  # the daemon's backlog runs it (brandmind/backlog.py)
        return f"extraction queued ({extract['queued']} job(s); `bm queue` shows them)"
    line = "facts: " + ", ".join(f"{facts.get(k, 0)} {k}" for k in ("added", "confirmed", "updated", "contradicted"))
    extra = []
    if extract and extract.get("extractor", "rules") != "rules":
        extra.append(f"{extract['extractor']}: {llm['calls'] if llm else 0} call(s), "
                     f"{llm['tokens'] if llm else 0} tokens")
        if llm and llm.get("capped"):
            extra.append(f"capped: {extract.get('skipped_turns', 0)} turn(s) not read "
                         "(raise llm_max_calls / llm_max_tokens)")
        if extract.get("bad_chunks"):
            extra.append(f"{extract['bad_chunks']} unreadable answer(s) skipped")
    if extra:
        line += " (" + "; ".join(extra) + ")"
    return line


def dry_run_lines(report: dict[str, Any]) -> list[str]:
    """The human summary of `bm ingest --dry-run`: what would be stored and extracted."""
    lines = [f"dry run: would ingest {report['would_ingest']} message(s)"
             + (f" ({report['edited']} of them edits of stored ones)" if report.get("edited") else "")
             + f", {report['duplicates']} already known, "
             + (f"{report['forgotten']} forgotten before, " if report.get("forgotten") else "")
             + f"{len(report['bad'])} bad line(s); nothing was stored"]
    extract = report.get("extract")
    if extract is not None:
        llm = report.get("llm") or {}
        if extract["extractor"] == "rules":
            lines.append(f"extractor rules: {extract['found']} fact(s) from {extract['turns']} turn(s), no LLM calls")
            lines.extend(f"  {f['text']}" for f in extract.get("would_extract", []))
        else:
            line = (f"extractor {extract['extractor']}: about {llm.get('calls', 0)} call(s) and "
                    f"{llm.get('tokens', 0)} tokens for {extract['turns']} turn(s)")
            if llm.get("capped"):
                line += (f"; the caps stop it before {extract.get('skipped_turns', 0)} turn(s) "
                         "(raise llm_max_calls / llm_max_tokens)")
            lines.append(line)
    return lines
