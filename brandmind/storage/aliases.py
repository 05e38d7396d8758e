"""The names speakers are called by: "Kate" for the speaker recorded as ``Emi``.

People in a conversation call each other by names that are not always the ones a store
records as its speakers (a chat app's display name, a nickname: "Mel" for Melanie, "Jo" for
Joanna, or a pseudonymised transcript).  A question names the person as the others call
them; recall ranks by speaker (brandmind/scoring.py), so the name has to be resolved first.

A capitalised word of a query that names no speaker (search.mentions) is a speaker's alias
when the conversation addresses that speaker by it: among the user's newest turns holding the
word (``SAMPLE``), the ones using it as a form of address ("Hey Kate!", "Thank you, Kate.",
"What about you Kate?", "Kate! ...") vote for the speaker they were said to: the nearest
earlier turn of the same thread by someone else.  The word is that speaker's alias when one
speaker has at least ``MIN_VOTES`` votes, two thirds of them, and at least ``MIN_SHARE`` of
the turns holding the word are such addresses: a place or a third person named in passing
("we met Kate at the station") is rarely addressed.  Computed when a query asks, from the
live turns only (a forgotten turn no longer votes); cached by the search index until a row
holding the word is added (:func:`said_since`) or any row changes or goes.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from .keywords import STOPWORDS

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore
    from .recallindex import RecallIndex

SAMPLE = 50       # the newest turns holding the word that are read
MIN_VOTES = 3     # addresses to one speaker needed
MIN_SHARE = 0.2   # of the turns holding the word, the share that must be addresses
MAX_CANDIDATES = 4  # words of one query looked at
MAX_ASKED = 12    # addressing turns whose addressee is looked up (the newest)

_GREETING = (r"(?:hey|hi|hello|hiya|yo|morning|good morning|good night|night|evening|thanks|"
             r"thank you|thx|bye|goodbye|see you|congrats|congratulations|sorry|dear|love you|"
             r"miss you|welcome back|welcome|ok|okay|oh|aw+|omg|wow|haha|lol)")
_CANDIDATE = re.compile(r"(?<=[\w,;:] )([A-Z][a-z]+)(?![\w-])")  # capitalised, not opening the text


def candidates(text: str, named_words: set[str]) -> list[str]:
    """The capitalised words of ``text`` that may be names (not its first word, no stopword,
    none of ``named_words``, the lower-case words that already name a speaker), the first
    ``MAX_CANDIDATES``."""
    out: list[str] = []
    for word in _CANDIDATE.findall(text):
        low = word.lower()
        if low not in STOPWORDS and low not in named_words and word not in out:
            out.append(word)
    return out[:MAX_CANDIDATES]


_OPENS = re.compile(r"(?:^|\n)\s*$")                        # before: nothing on its line
_GREETS = re.compile(r"(?i:\b" + _GREETING + r")[,!.]*\s+$")  # before: "hey ", "thank you, "
_COMMA = re.compile(r",\s*$")
_YOU = re.compile(r"\byou\s+$")
_ENDS = re.compile(r"\s*(?:[!?.)~]|$)")                       # after: the clause ends
_PAUSES = re.compile(r"\s*[,!]")


def addresses(text: str, at: "re.Match[str]") -> bool:
    """Whether the name found ``at`` in ``text`` (a turn's words, without its speaker) is said
    to someone: "Kate! ..." or "Kate, ..." opening a line, "Hey Kate", "..., Kate?", "you
    Kate." (not "a friend, Kate, who": a name between commas is more often said of someone)."""
    before, after = text[max(0, at.start() - 30):at.start()], text[at.end():at.end() + 4]
    if _OPENS.search(before) and (at.start() < 30 or "\n" in before):
        return _PAUSES.match(after) is not None
    if _GREETS.search(before):
        return True
    if _COMMA.search(before) or _YOU.search(before):
        return _ENDS.match(after) is not None
    return False


def spoken_to(index: "RecallIndex", rowid: int, steps: int = 8) -> str | None:
    """The speaker a turn answers: the nearest earlier turn of its thread by someone else
    (the recall index's ``prev`` links, at most ``steps`` back); None when there is none."""
    c = index.cols
    at = int(index.positions([rowid])[0])
    if at < 0:
        return None
    own = int(c["speaker"][at])
    for _ in range(steps):
        before = int(c["prev"][at])
        at = int(index.positions([before])[0]) if before >= 0 else -1
        if at < 0:
            return None
        code = int(c["speaker"][at])
        if code != own and index.values["speaker"][code]:
            return index.values["speaker"][code]
    return None


def said_since(sql: "SQLStore", word: str, rowid: int) -> bool:
    """Whether a row past ``rowid`` holds ``word`` (as FTS5 finds it: what
    :func:`speaker_called` reads)."""
    return sql.conn.execute("SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? AND rowid > ? LIMIT 1",
                            (_phrase(word), rowid)).fetchone() is not None


def _phrase(word: str) -> str:
    """``word`` as an FTS5 query of that one word."""
    return '"' + word.lower() + '"'


def speaker_called(sql: "SQLStore", index: "RecallIndex", user: str, word: str) -> str | None:
    """The speaker the user's conversations call ``word`` (see the module doc), or None.
    A text said more than once counts once."""
    rowids = [r[0] for r in sql.conn.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
        (_phrase(word), SAMPLE * 8))]  # every user's: the user's newest SAMPLE among them
    if not rowids:
        return None
    # by rowid ("+user_id": an index on user_id would have SQLite walk all the user's rows)
    rows = sql.conn.execute(
        f"SELECT rowid, speaker, text FROM memories WHERE rowid IN ({','.join('?' * len(rowids))}) "
        "AND +user_id = ? AND speaker IS NOT NULL AND thread IS NOT NULL ORDER BY rowid DESC LIMIT ?",
        (*rowids, user, SAMPLE)).fetchall()
    held: dict[str, bool] = {}  # text -> whether it addresses someone by the word
    said: list[int] = []        # the rowids of the addressing turns, newest first
    pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
    for rowid, speaker, text in rows:
        words = text[len(speaker) + 2:] if text.startswith(speaker + ": ") else text
        if words in held:
            continue  # said before
        found = list(pattern.finditer(words))
        if not found:
            continue  # the word only in another form (stemmed, lower case)
        held[words] = any(addresses(words, at) for at in found)
        if held[words]:
            said.append(rowid)
    if len(said) < MIN_VOTES or len(said) < MIN_SHARE * len(held):
        return None
    votes = Counter(filter(None, (spoken_to(index, rowid) for rowid in said[:MAX_ASKED])))
    if not votes:
        return None
    speaker, n = votes.most_common(1)[0]
    if n >= MIN_VOTES and n * 3 >= 2 * sum(votes.values()):
        return speaker
    return None
