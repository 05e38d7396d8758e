"""The block an agent puts in its prompt: ``Memory.context`` / ``bm context``.

Instead of the last N raw messages, an agent asks for the best context that fits
a token budget.  Four sections, in this order, which is also their priority:

``core``      the core memory blocks of the user and of the agent (brandmind/blocks.py);
``shared``    the shared blocks of the personas the user holds (what was learned serving
              such users; never anyone's PII, see brandmind/pii.py);
``memories``  the memories ``Memory.recall`` finds for the query (agent and global
              scopes as recall merges them; retired facts never appear), each with its date;
``recent``    the last ``recent`` beads of the user's thread, oldest first (brandmind/beads.py).

Building the block only reads: it never refreshes the workspace (``bm context`` runs that
refresh before it reads, see brandmind/workspace.py).

Choosing what fits
------------------
Every candidate is rendered on its own (a line of the text block, or a JSON
object) and its tokens counted with the documented counter (brandmind/tokens.py) when
it is considered; one whose words alone (a lower bound: no token spans whitespace)
no longer fit what is left is skipped uncounted.  Each has a value:

* core and shared blocks: they go in while they fit, in their order;
* memories: recall's fused score divided by the best score (1.0 for the top hit;
  ``1 / rank`` when recall gives no score).  Recall is asked for 30 memories, or one for
  every 16 tokens of budget when that is more (at most 200), so a large budget is spent
  on evidence, not left empty;
* beads: recency, ``0.85 ** i`` for the i-th newest (1.0 for the last turn); beyond the
  newest 4, a quarter of that: an old "thanks" is worth less than a relevant memory.  A
  recent bead that recall found too takes the recalled memory's value and tier.

Candidates are filled by tier, then by value within a tier: every core block that fits
(tier 0), shared blocks (1), recall's top memories (as many as a default recall returns:
``recall_agent_k`` + ``recall_global_k``, 8) (2), the newest 4 beads (3), then the further
memories and the older beads on one scale (4).  One is added when it, plus its section's
header if the section is still empty (and its day's line, below), fits in what is left;
otherwise it is skipped and smaller ones may still go in.  (Filling by value per token
instead favoured short weak lines over the long one that answers: 82.8% of LoCoMo dev's
evidence in 2,000 tokens against 90.4% in value order, scripts/bench_context.py.)  The
chosen ones are then serialised in section order and the *exact returned string* is
counted (with bm's counters, which are additive over whitespace, as the sum of its lines'
counts, mostly cached: tokens.py; a caller's own counter counts the whole string); should
it exceed the limit (it cannot with bm's counters, but a future counter might), the chosen
candidate of lowest value per token is removed until it fits.  Each candidate was counted
as its own full line, so a block whose turns continue the line above (below) comes out
shorter than the sum: the candidates left out are offered what it saved, in the same
order, for up to ``REFILL_ROUNDS`` rounds (``_refill``; +1.5 points of REALTALK dev's
evidence at 2,000 tokens, scripts/bench_context.py).  So
``tokens <= budget * (1 - margin)`` always, and a budget smaller than any header gives
an empty block (``""``, 0 tokens) with every candidate listed in ``dropped``.

Truncation: the first candidate by priority (the first core block, else recall's best
memory, else the newest turn) is never left out only for being longer than the whole
budget: it is cut at a word boundary to the longest prefix that fits, marked with ``…``
(and ``"truncated": true`` in JSON), and listed in the result's ``truncated``.  So a
tight budget shows the start of the memory that answers the query, not a "thanks".

Deduplication: a recent bead that a recalled raw-turn memory was made from (its
provenance names the bead) appears once, as the bead, with the better of the two
values; memories with the same text appear once (the best ranked).

Formats
-------
``text``: ``## Core memory`` / ``## Relevant memories`` / ``## Recent conversation``,
each followed by its lines, sections separated by a blank line, empty sections
left out.  Memories are excerpts by day: the memories of one day come together under
one date line (in time order, at the place of the day's best-ranked memory), so turns
of one conversation read as one excerpt and no line repeats a date; a turn by the
speaker of the line above, in the same conversation (thread and episode), continues
that line, indented, without repeating the speaker (real chats come in bursts of short
messages)::

    ## Relevant memories
    [2024-03-04]
    - Ann: I work as a backend engineer at Tidewater Labs
      I'm in the office on Tuesdays and Thursdays
    - assistant: Noted.
    [2024-05-02]
    - (preference) Ann prefers window seats

    ## Recent conversation
    [2024-05-20 09:14] Ann: can you book the ferry for Friday?
    [09:15] assistant: Sure: the 18:40 from Cais do Sodré?

A bead shows its date only when it differs from the line above (each bead's
token estimate is its longer, dated form, so estimates stay upper bounds).
Continuation lines of a multi-line text are indented by two spaces, so content
can never pass for a header.  ``json``: the same sections as compact JSON
(``{"memories": [...], "recent": [...]}``, empty sections left out); the budget
then applies to that JSON string.

Blocks
------
Core blocks come from ``Blocks(store).core(user=, agent=)`` (brandmind/blocks.py: the
user's own blocks, then the agent's blocks for that user), shared ones from
``Blocks(store).shared(user=)``: only the persona blocks of personas
that user holds, so another user's private block can never reach this context.
Blocks are read at call time, so an edit shows in the next context.  The budget is a
hard limit even for core blocks: a core block too large for it is left out and
listed in ``dropped`` (a block's own character limit keeps this rare).
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import query as query_mod
from . import validate
from .beads import beads_before, beads_tail
from .blocks import Blocks
from .clock import parse_time
from .errors import UsageError
from .tokens import TokenCounter, get_counter

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


SECTIONS = ("core", "shared", "memories", "recent")
HEADERS = {"core": "## Core memory", "shared": "## Shared experience (persona)",
           "memories": "## Relevant memories", "recent": "## Recent conversation"}
FORMATS = ("text", "json")
MAX_BUDGET = 1_000_000
RECALL_K = 30          # memories asked of recall at least; more for a larger budget:
TOKENS_PER_RECALLED = 16  # one more memory asked for each 16 tokens of budget ...
MAX_RECALL_K = 200     # ... up to this many (the budget decides how many are kept)
MAX_RECENT = 1000
BEAD_DECAY = 0.85      # value of the i-th newest bead: BEAD_DECAY ** i
RECENT_KEEP = 4        # the newest beads that go in right after recall's top memories;
RECENT_VALUE = 0.25    # older ones compete with further memories at this share of that value
MIN_COST = 8           # tokens below this count as this when ranking by value per token
COUNT_BATCH = 24       # candidates counted per tokenizer call while filling (_fill)
REFILL_ROUNDS = 3      # rounds of filling what merged lines saved (_refill)
CORE_VALUE = 1e9
# priority tiers, filled in this order: core 0, shared 1, then
TIER_TOP, TIER_RECENT, TIER_REST = 2, 3, 4  # recall's top; the newest turns; everything else


@dataclass
class _Item:
    section: str
    key: str                    # memory id, bead id, or core block label
    order: int                  # position within its section in the output
    value: float
    obj: dict                   # the JSON form
    tier: int = 0               # priority: lower tiers are filled first (see _choose)
    group: str = ""             # memories: the day whose header line they share in text
    when: str = ""              # memories: their time (ISO), their order within their day
    line: str = ""              # the text form
    tokens: int = 0
    words: int = 0              # words of ``line``: a lower bound of its tokens (_at_least)
    turn: tuple = ()            # memories that are turns: (speaker, thread, episode): see _text_blocks
    called: str = ""            # turns: the name the question calls their speaker by ("Kate")
    dups: list[str] = field(default_factory=list)  # memory ids folded into this bead

    @property
    def density(self) -> float:
        return self.value / max(self.tokens, MIN_COST)


def check_budget(budget: Any) -> int:
    """A whole number of tokens from 1 to 1,000,000, else a UsageError (exit 2)."""
    try:
        value = operator.index(budget) if not isinstance(budget, bool) else None
    except TypeError:
        value = None
    if value is None or not 1 <= value <= MAX_BUDGET:
        raise UsageError(f"budget must be a whole number of tokens from 1 to {MAX_BUDGET:,}, got {budget!r}",
                         hint="e.g. --budget 2000")
    return value


def build_context(store: "Store", query: str | bytes, *, budget: int = 2000,
                  user: str | None = None, agent: str | None = None, now: str | int | None = None,
                  as_of: str | int | None = None, format: str = "text", recent: int = 20,
                  margin: float = 0.0, thread: str | None = None,
                  counter: TokenCounter | None = None) -> dict:
    """See ``Memory.context`` and the module docstring."""
    budget, recent_n, margin_f = _check_args(budget, format, recent, margin)
    now_ms = parse_time(now, field="now")
    as_of_ms = parse_time(as_of, field="as_of")
    limit = math.floor(budget * (1.0 - margin_f))
    counter = counter or get_counter()
    user_name = store.user(user)

    k = max(RECALL_K, min(MAX_RECALL_K, limit // TOKENS_PER_RECALLED))
    # recall's request checked and its query's embedding started first: the core blocks, the
    # names and the recent turns are read while the query is embedded (in a thread)
    finish = query_mod.prepare(store, query, k=k, user=user_name, agent=agent, now=now, as_of=as_of,
                               explain=False, brief=True)  # brief: what the block shows
    items: list[_Item] = _block_items(store, user_name, agent)
    # the question's names for speakers recorded under others ("Kate" for Emi): their turns say so
    names: dict[str, list[str]] = {}
    for word, speaker in store.searcher.aliases_in(validate.text(query, what="query"), user_name).items():
        names.setdefault(speaker, []).append(word)
    called = {speaker: "/".join(words) for speaker, words in names.items()}  # "Emi" -> "Kate"
    cutoff = min((t for t in (now_ms, as_of_ms) if t is not None), default=None)
    bead_items = _bead_items(beads_before(store, user_name, recent_n, cutoff, thread))
    memories = finish()
    for it in bead_items:
        it.called = called.get(it.obj.get("speaker") or "", "")
    items += _memory_items(memories, bead_items, _top_memories(store), format, called)
    items += bead_items

    header_cost, group_cost = _measure(items, format, counter)
    rank = {id(it): i for i, it in enumerate(items)}
    # within a tier, by value (recall's order for memories): a line per token greedy would
    # favour short weak lines over the long one that answers (measured: scripts/bench_context.py)
    order = sorted(items, key=lambda it: (it.tier, -it.value, rank[id(it)]))
    chosen, truncated = _choose(order, header_cost, group_cost, limit, counter, format)
    # the lines counted so far (text): sections' and days' headers, candidates as counted
    counted = {HEADERS[s]: n for s, n in header_cost.items()} if format == "text" else {}
    counted.update((_day_line(g), n) for g, n in group_cost.items())
    counted.update((it.line, it.tokens) for it in items if it.tokens >= 0 and format == "text")
    text, tokens = _fit(chosen, format, counter, limit, rank, counted)
    if format == "text":  # what merged lines saved (_text_blocks) goes to the next candidates
        chosen, text, tokens = _refill(order, chosen, text, tokens, header_cost, group_cost, limit, counter, rank,
                                       counted)

    kept = {id(it) for it in chosen}
    sections: dict[str, list] = {s: [] for s in SECTIONS}
    for it in _in_output_order(chosen):
        sections[it.section].append(it.obj)
    dropped: dict[str, list] = {s: [it.key for it in items if it.section == s and id(it) not in kept]
                                for s in SECTIONS}
    dropped["duplicates"] = [d for it in items for d in it.dups]
    return {"text": text, "tokens": tokens, "budget": budget, "margin": margin_f, "limit": limit,
            "format": format, "tokenizer": counter.name, "sections": sections, "dropped": dropped,
            "truncated": [k for k in truncated if any(it.key == k for it in chosen)]}


def _check_args(budget: Any, format: str, recent: Any, margin: Any) -> tuple[int, int, float]:
    """The budget, recent count and margin, checked (UsageError, exit 2, otherwise)."""
    budget = check_budget(budget)
    if format not in FORMATS:
        raise UsageError(f"format must be text or json, got {format!r}", hint="use format='text' or 'json'")
    try:
        recent_n = operator.index(recent) if not isinstance(recent, bool) else None
    except TypeError:
        recent_n = None
    if recent_n is None or not 0 <= recent_n <= MAX_RECENT:
        raise UsageError(f"recent must be a whole number from 0 to {MAX_RECENT}, got {recent!r}",
                         hint="e.g. --recent 20 (0: no recent conversation)")
    try:
        margin_f = float(margin)
    except (TypeError, ValueError):
        margin_f = float("nan")
    if not 0.0 <= margin_f < 1.0:
        raise UsageError(f"margin must be a fraction from 0 to below 1, got {margin!r}",
                         hint="e.g. --margin 0.15 keeps 15% of the budget free for another tokenizer")
    return budget, recent_n, margin_f


def _measure(items: list[_Item], format: str, counter: TokenCounter) -> tuple[dict[str, int], dict[str, int]]:
    """Render every candidate (``line``); returns each section header's cost and each memory
    day header's (text only).  Candidates are counted later, and only those that may fit
    (``_count``): most of recall's ~125 never could, and counting is the block's main cost."""
    for it in items:
        it.line = _text_line(it) if format == "text" else json.dumps(it.obj, ensure_ascii=False,
                                                                     separators=(",", ":"))
        it.tokens = -1  # not counted yet
        it.words = len(it.line.split())
    header_texts = {s: (HEADERS[s] if format == "text" else json.dumps(s) + ":[]") for s in SECTIONS}
    groups = sorted({it.group for it in items if it.group})
    counts = counter.count_many([header_texts[s] for s in SECTIONS] + [_day_line(g) for g in groups])
    header_cost = dict(zip(SECTIONS, counts[:len(SECTIONS)]))
    if format == "json":  # the braces and the comma between sections
        header_cost = {s: n + 1 for s, n in header_cost.items()}
    return header_cost, dict(zip(groups, counts[len(SECTIONS):]))


def _count(items: list[_Item], format: str, counter: TokenCounter) -> None:
    """Count the candidates of ``items`` not yet counted, in one batch."""
    todo = [it for it in items if it.tokens < 0]
    # json: one comma joins it to its neighbour (counted even when it is the first: an overestimate)
    for it, n in zip(todo, counter.count_many([it.line for it in todo])):
        it.tokens = n + (1 if format == "json" else 0)


def _at_least(it: _Item) -> int:
    """A lower bound of ``it``'s tokens without counting: no token spans whitespace and every
    word is at least one (true of both of bm's counters; a counter for which it is not only
    makes a candidate be skipped that might have fitted, never a block over its limit)."""
    return it.tokens if it.tokens >= 0 else it.words


def _fill(order: list[_Item], header_cost: dict[str, int], group_cost: dict[str, int],
          limit: int, format: str, counter: TokenCounter, used: int = 0,
          opened: set | None = None) -> list[_Item]:
    """The candidates of ``order`` taken greedily while they (and their section's header,
    for the first of a section, and their day's header line, for the first of a day) fit
    in ``limit`` tokens, ``used`` of them already spent on what opened the sections and
    days in ``opened``.  Counted a batch at a time, and only those that could still fit."""
    picked: list[_Item] = []
    opened = set(opened or ())

    def cost(it: _Item, tokens: int) -> int:
        extra = 0 if it.section in opened else header_cost[it.section]
        if it.group and it.group not in opened:
            extra += group_cost[it.group]
        return tokens + extra

    for start in range(0, len(order), COUNT_BATCH):
        batch = order[start:start + COUNT_BATCH]
        _count([it for it in batch if used + cost(it, _at_least(it)) <= limit], format, counter)
        for it in batch:
            if it.tokens < 0 and used + cost(it, _at_least(it)) <= limit:  # a header opened since
                _count([it], format, counter)
            if it.tokens >= 0 and used + cost(it, it.tokens) <= limit:
                used += cost(it, it.tokens)
                picked.append(it)
                opened.update((it.section, it.group))
    return picked


def _choose(order: list[_Item], header_cost: dict[str, int], group_cost: dict[str, int], limit: int,
            counter: TokenCounter, format: str) -> tuple[list[_Item], list[str]]:
    """The candidates that go in, from ``order`` (by tier, then value), and the keys of those
    cut to fit (see the module docstring)."""
    # the first candidate by priority never goes missing for being too long: cut to fit
    truncated = []
    if order:
        lead = order[0]
        _count([lead], format, counter)
        room = limit - header_cost[lead.section] - group_cost.get(lead.group, 0)
        if lead.tokens > room and _truncate(lead, room, counter, format):
            truncated.append(lead.key)
    return _fill(order, header_cost, group_cost, limit, format, counter), truncated


def _fit(chosen: list[_Item], format: str, counter: TokenCounter, limit: int,
         rank: dict[int, int], counted: dict[str, int] | None = None) -> tuple[str, int]:
    """The chosen candidates serialised, and the exact token count of that string; the
    candidate of lowest value per token is removed (from ``chosen``) while it is over.
    ``counted``: lines already counted (text, additive counters), added to as lines are."""
    counted = {} if counted is None else counted

    def render() -> tuple[str, int]:
        if format == "text" and getattr(counter, "additive", False):
            # no token spans a newline: the text's count is its lines' (counted, and kept, one by one)
            blocks = _text_blocks(chosen)
            lines = [line for b in blocks for line in b]
            todo = list(dict.fromkeys(line for line in lines if line not in counted))
            counted.update(zip(todo, counter.count_many(todo)))
            return "\n\n".join("\n".join(b) for b in blocks), sum(counted[line] for line in lines)
        text = _render_text(chosen) if format == "text" else _render_json(chosen)
        return text, counter.count(text) if text else 0

    text, tokens = render()
    while tokens > limit and chosen:  # never with additive counters; a guarantee, not an estimate
        worst = min(chosen, key=lambda it: (it.density, -rank[id(it)]))
        chosen.remove(worst)
        text, tokens = render()
    return text, tokens


def _refill(order: list[_Item], chosen: list[_Item], text: str, tokens: int, header_cost: dict[str, int],
            group_cost: dict[str, int], limit: int, counter: TokenCounter, rank: dict[int, int],
            counted: dict[str, int]) -> tuple[list[_Item], str, int]:
    """Fill what the rendered block left of ``limit``: each candidate was counted as its own
    full line, but a turn that continues the line above (the same speaker, the same
    conversation) is written without its speaker, so the block is often shorter than the sum;
    the candidates left out are offered the rest, in the same order, until nothing more fits
    (a few rounds).  ``_fit`` keeps the exact count within the limit whatever the merges do."""
    for _ in range(REFILL_ROUNDS):
        kept = {id(it) for it in chosen}
        rest = [it for it in order if id(it) not in kept]
        if not rest or limit - tokens < 2:
            break
        opened = {it.section for it in chosen} | {it.group for it in chosen if it.group}
        more = _fill(rest, header_cost, group_cost, limit, "text", counter, used=tokens, opened=opened)
        if not more:
            break
        chosen = chosen + more
        text, tokens = _fit(chosen, "text", counter, limit, rank, counted)
        counted.update((it.line, it.tokens) for it in more)
    return chosen, text, tokens


def _truncate(it: _Item, room: int, counter: TokenCounter, format: str) -> bool:
    """Cut ``it``'s text to the most words whose line (with a ``…`` marker) fits ``room``
    tokens; False (left whole) when not even one word fits."""
    words = it.obj["text"].split(" ")
    full = it.obj

    def line(n: int) -> tuple[str, dict]:
        obj = {**full, "text": " ".join(words[:n]).rstrip() + " …", "truncated": True}
        it.obj = obj
        text = _text_line(it) if format == "text" else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        it.obj = full
        return text, obj

    lo, hi, best = 1, len(words) - 1, None
    extra = 1 if format == "json" else 0
    while lo <= hi:  # the most words that fit (token counts grow with the words)
        mid = (lo + hi) // 2
        text, obj = line(mid)
        n = counter.count(text) + extra
        if n <= room:
            best, lo = (text, obj, n), mid + 1
        else:
            hi = mid - 1
    if best is None:
        return False
    it.line, it.obj, it.tokens = best
    return True


def _top_memories(store: "Store") -> int:
    return store.config.recall_agent_k + store.config.recall_global_k


# -- candidates ---------------------------------------------------------------------
def _block_items(store: "Store", user: str, agent: str | None) -> list[_Item]:
    """The user's and agent's core blocks, then the shared blocks of the user's personas."""
    api = Blocks(store)
    out = []
    for section, blocks in (("core", api.core(user=user, agent=agent)),
                            ("shared", api.shared(user=user))):
        for i, block in enumerate(blocks):
            value = str(block.get("value") or "")
            if not value.strip():
                continue
            obj = {"label": block["label"], "text": value}
            out.append(_Item(section, f"{section}:{block['label']}", i, CORE_VALUE, obj,
                             tier=SECTIONS.index(section)))
    return out


def _memory_items(memories: list[dict], beads: list[_Item], top: int, format: str,
                  called: dict[str, str] | None = None) -> list[_Item]:
    """Recall's memories as candidates: recall's ``top`` first (tier 2), the rest with the
    older recent turns (tier 4); in text, those of one day share its header line, and a turn
    whose speaker the question calls by another name (``called``) shows it: "Emi (Kate): ..."."""
    by_bead = {b.key: b for b in beads}
    bead_texts = {_bead_as_turn_text(b.obj): b for b in beads}
    best = max((m.get("score") or 0.0 for m in memories), default=0.0)
    out: list[_Item] = []
    seen: dict[str, _Item] = {}
    for rank, m in enumerate(memories):
        score = m.get("score")
        value = score / best if (score is not None and best > 0 and score > 0) else 1.0 / (rank + 1)
        tier = TIER_TOP if rank < top else TIER_REST
        bead = _source_bead(m, by_bead, bead_texts)
        if bead is not None:  # the same turn is in the recent window: show it once, there
            bead.value = max(bead.value, value)
            bead.tier = min(bead.tier, tier)
            bead.dups.append(m["id"])
            continue
        text = m["text"]
        if text in seen:
            seen[text].dups.append(m["id"])
            continue
        date = (m.get("ts") or "")[:10]
        obj = {"id": m["id"], "date": date, "type": m.get("type"), "scope": m.get("scope"), "text": text}
        if score is not None:
            obj["score"] = score
        meta = m.get("meta") or {}
        speaker = meta.get("speaker") if meta.get("kind") == "turn" else None
        turn = (speaker, meta.get("thread"), meta.get("episode")) if speaker and text.startswith(f"{speaker}: ") else ()
        seen[text] = item = _Item("memories", m["id"], rank, value, obj, tier=tier,
                                  group=(date or "undated") if format == "text" else "", when=m.get("ts") or "",
                                  turn=turn, called=(called or {}).get(speaker, "") if turn else "")
        out.append(item)
    return out


def _source_bead(m: dict, by_bead: dict, bead_texts: dict) -> _Item | None:
    """The recent bead this memory is the raw turn of, if that bead is a candidate."""
    for p in m.get("provenance") or []:
        bead = by_bead.get(p.get("bead")) if isinstance(p, dict) else None
        if bead is not None and ((m.get("meta") or {}).get("kind") == "turn"
                                 or m["text"] in (bead.obj["text"], _bead_as_turn_text(bead.obj))):
            return bead
    return bead_texts.get(m["text"]) if (m.get("meta") or {}).get("kind") == "turn" else None


def _bead_as_turn_text(obj: dict) -> str:
    """How ingest words a bead's raw-turn memory: ``speaker: content``."""
    return f"{obj['speaker']}: {obj['text']}" if obj.get("speaker") else obj["text"]


def _bead_items(beads: list[dict]) -> list[_Item]:
    """The recent turns: the newest ``RECENT_KEEP`` right after recall's top memories (tier
    3), the older ones with the further memories (tier 4) at ``RECENT_VALUE`` of their value,
    unless recall found them too (``_memory_items`` raises them)."""
    out = []
    for i, b in enumerate(beads):
        age = len(beads) - 1 - i  # 0: the newest
        obj = {"id": b["id"], "ts": b["ts"], "role": b.get("role"), "speaker": b.get("speaker"),
               "text": b.get("content") or ""}
        value = BEAD_DECAY ** age * (1.0 if age < RECENT_KEEP else RECENT_VALUE)
        out.append(_Item("recent", b["id"], i, value, obj, tier=TIER_RECENT if age < RECENT_KEEP else TIER_REST))
    return out


# -- rendering ------------------------------------------------------------------------
def _in_output_order(items: list[_Item]) -> list[_Item]:
    """Sections in order; memories by recall's rank, except that in text the memories of one
    day come together (at the place of the day's best one, then by time): one excerpt under
    one date line instead of a date on every line."""
    first: dict[str, int] = {}
    for it in items:
        if it.group:
            first[it.group] = min(first.get(it.group, it.order), it.order)

    def key(it: _Item) -> tuple:
        if it.group:
            return (SECTIONS.index(it.section), first[it.group], it.when, it.order)
        return (SECTIONS.index(it.section), it.order, "", 0)
    return sorted(items, key=key)


def _day_line(day: str) -> str:
    return f"[{day}]"


def _indent(text: str) -> str:
    return "\n  ".join(text.splitlines() or [""])


def _text_line(it: _Item) -> str:
    o = it.obj
    if it.section in ("core", "shared"):
        return f"{o['label']}: {_indent(o['text'])}" if o.get("label") else _indent(o["text"])
    if it.section == "memories":  # its date is on its day's line (_render_text)
        kind = "" if o.get("type") in ("fact", "episode", None) else f"({o['type']}) "
        if it.called:  # "Emi: ..." -> "Emi (Kate): ..."
            speaker = it.turn[0]
            return f"- {kind}{speaker} ({it.called}): {_indent(o['text'][len(speaker) + 2:])}"
        return f"- {kind}{_indent(o['text'])}"
    return _bead_line(o, with_date=True, called=it.called)


def _bead_line(o: dict, *, with_date: bool, called: str = "") -> str:
    """``[2024-05-20 09:14] Ann: text``; ``[09:14] Ann: text`` when the previous line
    shown has the same date (the line's token estimate is the longer form); ``Ann (Annie):``
    when the question calls the speaker ``called``."""
    ts = o.get("ts") or ""
    when = ts[:16].replace("T", " ") if with_date else ts[11:16]
    who = o.get("speaker") or o.get("role") or "?"
    who = f"{who} ({called})" if called else who
    return f"[{when}] {who}: {_indent(o['text'])}" if when else f"{who}: {_indent(o['text'])}"


def _render_text(chosen: list[_Item]) -> str:
    return "\n\n".join("\n".join(block) for block in _text_blocks(chosen))


def _text_blocks(chosen: list[_Item]) -> list[list[str]]:
    """The text block's sections, each as its lines (header first)."""
    blocks = []
    for section in SECTIONS:
        items = [it for it in _in_output_order(chosen) if it.section == section]
        if not items:
            continue
        if section == "recent":
            lines, day = [], None
            for it in items:
                ts = it.obj.get("ts") or ""
                lines.append(_bead_line(it.obj, with_date=ts[:10] != day or not ts, called=it.called))
                day = ts[:10]
        else:
            lines, day, run = [], None, ()
            for it in items:
                if it.group and it.group != day:
                    lines.append(_day_line(it.group))
                    run = ()
                day = it.group
                if it.turn and it.turn == run:  # the same speaker again, in the same conversation
                    lines.append("  " + _indent(it.obj["text"][len(it.turn[0]) + 2:]))
                else:
                    lines.append(it.line)
                run = it.turn
        blocks.append([HEADERS[section], *lines])
    return blocks


def _render_json(chosen: list[_Item]) -> str:
    if not chosen:
        return ""
    out: dict[str, list] = {}
    for it in _in_output_order(chosen):
        out.setdefault(it.section, []).append(it.obj)
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def full_history_tokens(store: "Store", *, user: str | None = None, counter: TokenCounter | None = None) -> int:
    """Tokens of the user's whole thread rendered as the recent section would render it
    (what sending the full history would cost), for comparisons."""
    counter = counter or get_counter()
    beads = beads_tail(store, len(store.log.bead_ids(store.user(user), None)) or 0, user=user)
    items = _bead_items(beads)
    for it in items:
        it.line = _text_line(it)
    return counter.count(_render_text(items)) if items else 0

