"""The one tool set bm offers agents: MCP (`bm mcp`), the daemon's tool calls
(`brandmind.cli.client.call_tool`) and the function-calling schemas (`bm tools export`).

Each tool is declared once in :data:`TOOLS`: its name and argument names follow the CLI
(`remember` takes ``text``, ``user``, ``agent``, ``type``; `recall` takes ``query``, ``user``,
``agent``, ``k``), a description written for the model that calls it, the JSON Schema of its
arguments, and the MCP annotations (readOnlyHint, destructiveHint, idempotentHint).
:func:`call` checks the arguments against that schema (an unknown tool, a missing, unknown
or wrongly typed argument is a :class:`~brandmind.errors.UsageError` naming the fix) and
runs the tool on a :class:`brandmind.memory.Memory`; the result is plain JSON.

The seed design's verbs are aliases: ``recall_memory`` (recall), ``create_note``
(remember), ``create_link`` (a typed link between two memories, `bm memories link`) and
``get_linked_notes`` (what is linked to a memory, `bm kg neighbors`).

This module imports only the standard library at import time: the daemon and
`bm tools export` load it, and neither should pay for the store or the model.
"""
from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

# = brandmind.validate.MEMORY_TYPES and brandmind.facts.LINK_TYPES (tests/test_tools_export.py checks),
# spelt here so that importing the tool set loads no library module
MEMORY_TYPES = ("fact", "preference", "decision", "insight", "question", "concept", "episode")
LINK_TYPES = ("extends", "contradicts", "supports", "example_of", "part_of", "relates_to", "answers",
              "caused_by", "temporal")
SNIPPET = 200  # characters of a memory recall shows; `get` returns the whole memory
FORMATS = ("mcp", "openai", "anthropic")


@dataclass(frozen=True)
class Tool:
    """One tool: ``params`` maps each argument to its JSON Schema; ``run(mem, args)`` does it."""

    name: str
    title: str
    description: str
    params: dict[str, dict]
    required: tuple[str, ...]
    run: Callable[[Any, dict], Any]
    read_only: bool
    destructive: bool = False
    idempotent: bool = False

    @property
    def input_schema(self) -> dict:
        return {"type": "object", "properties": {k: dict(v) for k, v in self.params.items()},
                "required": list(self.required), "additionalProperties": False}

    @property
    def annotations(self) -> dict:
        return {"title": self.title, "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive, "idempotentHint": self.idempotent,
                "openWorldHint": False}

    def signature(self) -> str:
        """``recall(query: string, user?: string, ...)``, for hints."""
        parts = [f"{k}{'' if k in self.required else '?'}: {v['type']}" for k, v in self.params.items()]
        return f"{self.name}({', '.join(parts)})"

    def schema(self, fmt: str) -> dict:
        """The tool as ``fmt`` (mcp, openai, anthropic) declares a tool."""
        if fmt == "openai":
            return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                     "parameters": self.input_schema}}
        if fmt == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": self.input_schema}
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.input_schema, "annotations": self.annotations}


# -- the arguments the tools share ------------------------------------------------------------------
def _s(description: str, **extra: Any) -> dict:
    return {"type": "string", "description": description, **extra}


USER = _s("Whose memory: one stable id per person (e.g. their login). Omit for the store's configured "
          "user. Users never see each other's memories.", minLength=1, maxLength=128)
AGENT = _s("Your agent id. With it, what you store is private to you for this user, and recall returns "
           "your own memories plus the user's shared ones; omit for the user's shared (global) scope.",
           minLength=1, maxLength=128)
TYPE = _s("What kind of memory: fact (default), preference, decision, insight, question, concept or "
          "episode.", enum=list(MEMORY_TYPES))
MEMORY_ID = _s("A memory id (m_...) as recall, context or remember returned it; a conversation turn id "
               "(b_...) works too.", minLength=1)
LABEL = _s("Block label: human (facts about the user), agent_persona (who you are), user_persona_profile "
           "(the user's role and industry), <persona>_service_experience (shared by a persona's users), "
           "or a custom label.", minLength=1, maxLength=128)
PERSONA = _s("A persona handle: its shared <handle>_service_experience block.", minLength=1, maxLength=128)
QUERY = _s("What you are looking for, in plain words (a question or a few keywords).", minLength=1)


def _brief(item: dict) -> dict:
    """A recall hit as the tools return it: id, snippet, score and what kind it is."""
    text = item.get("text") or ""
    out = {"id": item["id"], "snippet": text if len(text) <= SNIPPET else text[:SNIPPET - 1] + "…",
           "score": item.get("score"), "type": item.get("type"), "ts": item.get("ts")}
    if item.get("agent"):
        out["agent"] = item["agent"]
    if len(text) > SNIPPET:
        out["truncated"] = True
    return out


def _public(value: Any) -> Any:
    """``value`` without the library's private keys (``_user`` ...), as plain JSON."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("_"))}
    if isinstance(value, (list, tuple)):
        return [_public(v) for v in value]
    return value


# -- what each tool does -----------------------------------------------------------------------------
def _remember(mem: Any, a: dict) -> dict:
    item = mem.remember(a["text"], type=a.get("type") or "fact", user=a.get("user"), agent=a.get("agent"),
                        importance=a.get("importance", 0.5), ttl=a.get("ttl"), pin=bool(a.get("pin")))
    return {"id": item["id"], "user": item["user"], "agent": item["agent"], "type": item["type"],
            "ts": item["ts"], **({"expires_at": item["expires_at"]} if item.get("expires_at") else {})}


def _recall(mem: Any, a: dict) -> dict:
    mem.refresh_workspace(a.get("user"))  # notes edited on disk (as `bm recall`)
    hits = mem.recall(a["query"], k=a.get("k"), user=a.get("user"), agent=a.get("agent"))
    return {"results": [_brief(h) for h in hits],
            "note": "snippets only: call get with an id for the whole memory" if hits else
                    "nothing found for this user and query"}


def _get(mem: Any, a: dict) -> dict:
    ref = a["id"]
    return _public(mem.get_bead(ref) if ref.startswith("b_") else mem.get(ref))


def _context(mem: Any, a: dict) -> dict:
    mem.refresh_workspace(a.get("user"))
    ctx = mem.context(a["query"], budget=a.get("budget", 2000), user=a.get("user"), agent=a.get("agent"))
    return {"text": ctx["text"], "tokens": ctx["tokens"], "budget": ctx["budget"],
            "memory_ids": [m["id"] for m in ctx["sections"].get("memories", [])],
            "truncated": ctx.get("truncated", [])}


def _forget(mem: Any, a: dict) -> dict:
    from brandmind.errors import UsageError

    if ("id" in a) == ("match" in a):
        raise UsageError("forget takes exactly one of id and match",
                         hint='give the id recall returned, or match: "the words it says" (every one must occur)')
    if "match" in a:
        return mem.forget_matching(a["match"], user=a.get("user"))
    ref = a["id"]
    done = mem.forget_many([], [ref]) if ref.startswith("b_") else mem.forget_many([ref])
    return {"forgotten": done["memories"], "beads": done["beads"]}


def _block_get(mem: Any, a: dict) -> dict:
    return _public(mem.blocks.get(a["label"], user=a.get("user"), agent=a.get("agent"), persona=a.get("persona")))


def _block_list(mem: Any, a: dict) -> dict:
    return {"blocks": _public(mem.blocks.list(user=a.get("user"), agent=a.get("agent")))}


def _block_set(mem: Any, a: dict) -> dict:
    return _public(mem.blocks.set(a["label"], a["text"], user=a.get("user"), agent=a.get("agent"),
                                  persona=a.get("persona")))


def _block_append(mem: Any, a: dict) -> dict:
    return _public(mem.blocks.append(a["label"], a["text"], user=a.get("user"), agent=a.get("agent"),
                                     persona=a.get("persona")))


def _kg_link(mem: Any, a: dict) -> dict:
    return _public(mem.graph.add_edge(a["src"], a["dst"], a["predicate"], weight=a.get("weight", 1.0),
                                      user=a.get("user")))


def _kg_neighbors(mem: Any, a: dict) -> dict:
    return _public(mem.graph.neighbors(a["ref"], a.get("radius", 1), user=a.get("user")))


def _kg_hubs(mem: Any, a: dict) -> dict:
    return {"hubs": mem.graph.hubs(user=a.get("user"), at=a.get("at"), limit=a.get("limit", 20),
                                   by=a.get("by") or "degree")}


def _kg_clusters(mem: Any, a: dict) -> dict:
    return {"clusters": mem.graph.clusters(user=a.get("user"), at=a.get("at"), limit=a.get("limit", 20),
                                           min_size=a.get("min_size", 2), top=a.get("top", 5))}


def _skill_match(mem: Any, a: dict) -> dict:
    return {"skills": _public(mem.skills.match(a["query"], k=a.get("k", 5)))}


def _create_link(mem: Any, a: dict) -> dict:
    return _public(mem.graph.link(a["src"], a["dst"], a.get("type") or "relates_to", a.get("strength", 0.5)))


def _linked_notes(mem: Any, a: dict) -> dict:
    found = _public(mem.graph.neighbors(a["id"], a.get("radius", 1)))
    found["notes"] = [n for n in found["nodes"] if n["kind"] == "memory"]
    return found


# -- the tools ---------------------------------------------------------------------------------------
_REMEMBER = dict(
    params={"text": _s("The memory: one self-contained statement, e.g. \"Ann moved to Lisbon in May 2024\".",
                       minLength=1),
            "user": USER, "agent": AGENT, "type": TYPE,
            "importance": {"type": "number", "minimum": 0, "maximum": 1,
                           "description": "How much it matters, 0 to 1 (default 0.5)."},
            "ttl": _s("Forget it this long from now, e.g. 12h, 30d, 2w (default: kept until forgotten).",
                      minLength=2),
            "pin": {"type": "boolean", "description": "Never expire it nor forget it by age (default false)."}},
    required=("text",), run=_remember, read_only=False)
_RECALL = dict(
    params={"query": QUERY, "user": USER, "agent": AGENT,
            "k": {"type": "integer", "minimum": 1, "maximum": 1000,
                  "description": "How many results (default 10; with agent, 5 of its own and 3 shared)."}},
    required=("query",), run=_recall, read_only=True, idempotent=True)
_VIEW_LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many (default 20)."}
_AT = _s("A date (ISO 8601, e.g. 2024-05-01): the graph as it was true then; omit for now.", minLength=1)
_NEIGHBOR_RADIUS = {"type": "integer", "minimum": 1, "maximum": 3, "description": "Hops to walk: 1 (default), 2 or 3."}

TOOLS: list[Tool] = [
    Tool("remember", "Remember",
         "Store one memory about the user for later (a fact, preference, decision, ...). Store durable, "
         "self-contained statements, one per call; returns its id. Same as `bm remember`.", **_REMEMBER),
    Tool("recall", "Recall memories",
         "Search the user's memories: the best matches for a query, best first, as ids, short snippets "
         "and scores. Call get with an id for the whole memory. Same as `bm recall`.", **_RECALL),
    Tool("get", "Get a memory",
         "The whole memory (text, type, dates, provenance) for an id that recall, context or remember "
         "returned; a turn id (b_...) gives the conversation turn. Same as `bm memories show`.",
         {"id": MEMORY_ID}, ("id",), _get, read_only=True, idempotent=True),
    Tool("context", "Context for a prompt",
         "A ready-made memory block for what you are about to answer: the user's core blocks, the relevant "
         "memories and the recent conversation, fitted to a token budget. Put its text in your prompt. "
         "Same as `bm context`.",
         {"query": _s("What you are about to answer or do.", minLength=1),
          "budget": {"type": "integer", "minimum": 1, "maximum": 1_000_000,
                     "description": "Token budget of the block (default 2000)."},
          "user": USER, "agent": AGENT},
         ("query",), _context, read_only=True, idempotent=True),
    Tool("forget", "Forget a memory",
         "Forget a memory (or a turn) for good, with the turns it came from: it leaves recall, context and "
         "the store. Use when the user asks you to forget something or a memory is wrong. Give its id "
         "(`bm forget ID`), or match: words that all occur in what must go; then every memory and turn "
         "of the user holding them is forgotten and the sentences saying it leave their core blocks and "
         "notes (`bm forget --match`).",
         {"id": MEMORY_ID, "match": _s("Instead of id: words that all occur in what to forget (e.g. "
                                       "'locker code'); the user's memories, turns, block sentences and "
                                       "notes holding every one go.", minLength=1),
          "user": USER}, (), _forget, read_only=False, destructive=True, idempotent=True),
    Tool("block_get", "Read a core memory block",
         "Read a core memory block: a labelled text always shown in context (e.g. human: facts about the "
         "user; agent_persona: who you are), with its size and character limit. Same as `bm block show`.",
         {"label": LABEL, "user": USER, "agent": AGENT, "persona": PERSONA},
         ("label",), _block_get, read_only=True, idempotent=True),
    Tool("block_list", "List core memory blocks",
         "The user's core memory blocks (and, with agent, that agent's), with their text, size and limit, "
         "plus the shared blocks of the user's personas. Same as `bm block list`.",
         {"user": USER, "agent": AGENT}, (), _block_list, read_only=True, idempotent=True),
    Tool("block_set", "Replace a core memory block",
         "Replace the whole text of a core memory block (creating it). Read it first with block_get; to "
         "add a line use block_append. With agent, read-only blocks refuse. Same as `bm block set`.",
         {"label": LABEL, "text": _s("The block's new text (may be empty).", maxLength=1_000_000),
          "user": USER, "agent": AGENT, "persona": PERSONA},
         ("label", "text"), _block_set, read_only=False, destructive=True, idempotent=True),
    Tool("block_append", "Append to a core memory block",
         "Add a line at the end of a core memory block (creating it); concurrent appends both survive. "
         "Same as `bm block append`.",
         {"label": LABEL, "text": _s("The line to add.", minLength=1), "user": USER, "agent": AGENT,
          "persona": PERSONA},
         ("label", "text"), _block_append, read_only=False),
    Tool("kg_link", "Link two entities",
         "Add a fact to the user's knowledge graph: src -predicate-> dst between entities given by name or "
         "id (a name no node has yet becomes a new node), e.g. Ann lives_in Lisbon. Predicate mentions with "
         "a memory id as dst links an entity to a memory. Same as `bm kg link`.",
         {"src": _s("Source entity: a name (e.g. Ann) or a node id (n_...).", minLength=1),
          "predicate": _s("The relation, e.g. lives_in, works_at, likes (\"lives in\" becomes lives_in).",
                          minLength=1),
          "dst": _s("Target entity: a name or node id (or a memory id with predicate mentions).", minLength=1),
          "weight": {"type": "number", "minimum": 0, "maximum": 1, "description": "Strength, 0 to 1 (default 1)."},
          "user": USER},
         ("src", "predicate", "dst"), _kg_link, read_only=False),
    Tool("kg_neighbors", "Explore the knowledge graph",
         "What is connected to an entity or a memory within a few hops: related entities, linked memories "
         "and the edges between them. Same as `bm kg neighbors`.",
         {"ref": _s("An entity name or node id (n_...), or a memory id (m_...).", minLength=1),
          "radius": _NEIGHBOR_RADIUS, "user": USER},
         ("ref",), _kg_neighbors, read_only=True, idempotent=True),
    Tool("kg_hubs", "Most connected entities",
         "The user's most connected entities in the knowledge graph (people, places, tools ... that most "
         "current facts touch), best first, with degree, distinct neighbours, summed edge weight and how many "
         "memories mention each. Same as `bm kg hubs`.",
         {"user": USER, "limit": _VIEW_LIMIT, "by": _s("Rank by degree (default) or weight.", enum=["degree", "weight"]),
          "at": _AT},
         (), _kg_hubs, read_only=True, idempotent=True),
    Tool("kg_clusters", "Clusters of related entities",
         "Communities of the user's entities (what their facts tie together: e.g. work, family, a hobby), "
         "largest first, each with its best-connected entities and the memories that link them. Same as "
         "`bm kg clusters`.",
         {"user": USER, "limit": _VIEW_LIMIT,
          "min_size": {"type": "integer", "minimum": 1, "maximum": 1_000_000,
                       "description": "Only clusters of at least this many entities (default 2)."},
          "top": {"type": "integer", "minimum": 1, "maximum": 1000,
                  "description": "Entities and memories listed per cluster (default 5)."},
          "at": _AT},
         (), _kg_clusters, read_only=True, idempotent=True),
    Tool("skill_match", "Find skills for a task",
         "The stored skills (procedures: how to do something) that best fit a task, best first, with scores. "
         "Same as `bm skill match`.",
         {"query": _s("The task, in plain words.", minLength=1),
          "k": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many skills (default 5)."}},
         ("query",), _skill_match, read_only=True, idempotent=True),
    Tool("recall_memory", "Recall memories (alias of recall)",
         "Alias of recall (the seed design's name): search the user's memories, returning ids, snippets "
         "and scores, best first; get returns a whole memory.", **_RECALL),
    Tool("create_note", "Create a note (alias of remember)",
         "Alias of remember (the seed design's name): a note is a memory. Store one self-contained "
         "statement; returns its id.", **_REMEMBER),
    Tool("create_link", "Link two notes",
         "A typed link between two notes (memories) of one user, e.g. a new note that contradicts or "
         "extends an older one. Same as `bm memories link`.",
         {"src": _s("The note (memory id, m_...) the link starts from.", minLength=1),
          "dst": _s("The note (memory id, m_...) it points to.", minLength=1),
          "type": _s("How they relate (default relates_to).", enum=list(LINK_TYPES)),
          "strength": {"type": "number", "minimum": 0, "maximum": 1, "description": "0 to 1 (default 0.5)."}},
         ("src", "dst"), _create_link, read_only=False),
    Tool("get_linked_notes", "Notes linked to a note",
         "The notes (memories) and entities linked to a note within a few hops (kg_neighbors around a "
         "memory id); \"notes\" lists the linked memories.",
         {"id": _s("The note's memory id (m_...).", minLength=1), "radius": _NEIGHBOR_RADIUS},
         ("id",), _linked_notes, read_only=True, idempotent=True),
]
BY_NAME = {t.name: t for t in TOOLS}


def export(fmt: str) -> list[dict]:
    """Every tool's schema as ``fmt`` (mcp, openai, anthropic) declares tools."""
    if fmt not in FORMATS:
        from brandmind.errors import UsageError

        raise UsageError(f"unknown format {fmt!r}", hint="use one of: " + ", ".join(FORMATS))
    return [t.schema(fmt) for t in TOOLS]


def find(name: Any) -> Tool:
    """The tool called ``name``, or a UsageError listing the tools (and the nearest name)."""
    tool = BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        from brandmind.errors import UsageError

        close = difflib.get_close_matches(name, list(BY_NAME), n=1) if isinstance(name, str) else []
        raise UsageError(f"unknown tool {name!r}" + (f" (did you mean {close[0]}?)" if close else ""),
                         hint="the tools: " + ", ".join(BY_NAME))
    return tool


def check(tool: Tool, args: Any) -> dict:
    """``args`` checked against the tool's schema: a JSON object with its required arguments,
    no others, each of its type and range (a null is an omitted optional argument)."""
    from brandmind.errors import UsageError

    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise UsageError(f"{tool.name}: the arguments must be a JSON object, got {_json_type(args)}",
                         hint=f"call {tool.signature()}")
    unknown = sorted(str(k) for k in args if k not in tool.params)
    if unknown:
        raise UsageError(f"{tool.name}: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
                         hint=f"{tool.name} takes {tool.signature()}")
    missing = [k for k in tool.required if args.get(k) is None]
    if missing:
        raise UsageError(f"{tool.name}: missing required argument{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}", hint=f"call {tool.signature()}")
    out = {}
    for key, value in args.items():
        if value is not None:
            out[key] = _checked(tool, key, tool.params[key], value)
    return out


_TYPES = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false"}


def _checked(tool: Tool, key: str, schema: dict, value: Any) -> Any:
    from brandmind.errors import UsageError

    kind = schema["type"]
    ok = {"string": isinstance(value, str),
          "integer": isinstance(value, int) or (isinstance(value, float) and value.is_integer()),
          "number": isinstance(value, (int, float)) and math.isfinite(value),
          "boolean": isinstance(value, bool)}[kind]
    if isinstance(value, bool) and kind != "boolean":
        ok = False
    example = schema.get("enum", [None])[0] or {"string": "text", "integer": 5, "number": 0.5}.get(kind, True)
    hint = f"{key} takes {_TYPES[kind]}, e.g. {{\"{key}\": {_json(example)}}}"
    if not ok:
        raise UsageError(f"{tool.name}: {key} must be {_TYPES[kind]}, got {_json_type(value)}", hint=hint)
    if kind == "integer":
        value = int(value)
    if "enum" in schema and value not in schema["enum"]:
        raise UsageError(f"{tool.name}: {key} {value!r} is not one of the choices",
                         hint="use one of: " + ", ".join(schema["enum"]))
    low, high = schema.get("minimum"), schema.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        raise UsageError(f"{tool.name}: {key} must be from {low:,} to {high:,}, got {value!r}",
                         hint=f"e.g. {{\"{key}\": {_json(low if kind == 'integer' else (low + high) / 2)}}}")
    if kind == "string" and not value and schema.get("minLength"):
        raise UsageError(f"{tool.name}: {key} is empty", hint=f"give a non-empty {key}")
    if kind == "string" and len(value) > schema.get("maxLength", math.inf):
        raise UsageError(f"{tool.name}: {key} is {len(value):,} characters, over {schema['maxLength']:,}",
                         hint=f"shorten {key}")
    return value


def _json(value: Any) -> str:
    return json.dumps(value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def call(mem: Any, name: str, args: Any = None) -> Any:
    """Run tool ``name`` with ``args`` (a dict, as an MCP client sends it) on ``mem`` (a
    :class:`brandmind.memory.Memory`); returns a JSON-able result.  Bad input raises a
    :class:`brandmind.errors.BMError` (UsageError for the arguments, the library's own
    InvalidInput / NotFound for their values), never anything else."""
    tool = find(name)
    return tool.run(mem, check(tool, args))
