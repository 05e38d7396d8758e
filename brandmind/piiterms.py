"""The writer's private terms for the PII guard (``brandmind.pii``): pure functions.

:func:`private_terms_from` turns what a writer keeps private -- their ``human`` block, their
other private blocks, their newest memories, their graph nodes and the objects of their
facts -- into a :class:`Terms` set of names and places that must not reach a block other
users read.  ``brandmind.pii`` re-exports both; :func:`brandmind.privacy.gather_private_terms`
reads the inputs from a store (and caches the result until the next op is applied).

From the texts: capitalised proper nouns (minus common words, months, weekdays; a word the
user also writes in lower case matches only as written), and whatever a cue marks as a name
whatever its case or place in the sentence (:func:`_cue_terms`: "a dog called Biscuit",
"Pet: Biscuit", "Biscuit is Ann's dog", "Biscuit (her dog)", "Biscuit loves walks"); from the
rows: the subjects and objects of their facts and their graph nodes (people -> name, places
-> place).
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

from .lazyre import lazy

__all__ = ["MEMORY_LIMIT", "Terms", "private_terms_from"]


class Terms(set):
    """A set of private terms that also knows each term's kind (``name``, ``place`` or
    ``private``) and which terms match only as written (``exact``)."""

    def __init__(self, kinds: Mapping[str, str] | None = None) -> None:
        super().__init__(kinds or {})
        self.kinds: dict[str, str] = dict(kinds or {})
        self.exact: set[str] = set()  # terms matched case-sensitively (names that are also words)

    _RANK = {"name": 0, "place": 1, "private": 2}

    def add_term(self, term: str, kind: str) -> None:
        """Add ``term``; of two kinds for one spelling the stronger stays (name > place > private)."""
        self.add(term)
        old = self.kinds.get(term)
        if old is None or self._RANK.get(kind, 3) < self._RANK.get(old, 3):
            self.kinds[term] = kind


# -- the writer's private terms ---------------------------------------------------------------------
_COMMON = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over own
same she should so some such than that the their theirs them themselves then there these they this
those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves user users name personal facts fact discovered
interaction prefers prefer likes like usually often always never new old good great best first last
next yes ok okay thanks thank please hello hi hey dear team client clients customer customers agent
assistant today tomorrow yesterday morning evening night week month year monday tuesday wednesday
thursday friday saturday sunday january february march april may june july august september october
november december spring summer autumn fall winter q1 q2 q3 q4 kpi kpis yoy mom qsr cpg roi
analyst manager director head lead vp ceo cfo coo cmo senior junior role industry persona profile
professional background context habits style communication detailed explanations tables data
report reports analysis question questions answer answers note notes meeting meetings call email
phone address store stores location locations site sites brand brands market markets retail real
estate consumer insights asset management media tobacco restaurant restaurants company companies
it's i'm i've i'd don't doesn't can't won't isn't we're they're he's she's let's
""".split())
_PROPER = lazy(r"\b[A-Z][\w'’\-]*[a-z][\w'’\-]*(?:\s+(?:(?:de|van|von|da|del|la|le|di|du|bin|al)\s+)?"
                     r"[A-Z][\w'’\-]*[a-z][\w'’\-]*)*")
_NAME_LINE = lazy(r"\b(?:user\s+)?name\s*:\s*([^\n,;.]+)", re.IGNORECASE)
_PLACE_BEFORE = lazy(r"\b(?:in|near|from|to|at|around|outside|visited|visiting)\s+(?:the\s+)?$", re.IGNORECASE)
_PLACE_TYPES = {"place", "location", "city", "country", "town", "region", "address", "venue", "site", "area"}
_PERSON_TYPES = {"person", "people", "human", "contact", "family", "friend", "colleague", "name"}
_SENTENCE_START = lazy(r"(?:^|[.!?:;\n]\s*|[\"“(]\s*|[-*•]\s+)$")
MEMORY_LIMIT = 5000  # the newest memories a writer's private terms are read from


def _proper_nouns(text: str, lower_words: set[str]) -> list[tuple[str, bool, str]]:
    """(term, at_sentence_start, kind) for each capitalised run of ``text``; the kind is
    "place" after in / near / from / to / at ..., else "private"."""
    out = []
    for m in _PROPER.finditer(text):
        kind = "place" if _PLACE_BEFORE.search(text, max(0, m.start() - 14), m.start()) else "private"
        term = re.sub(r"['’]s$", "", m.group()).strip("'’-")
        words = term.split()
        if len(words) == 1:
            w = words[0].casefold()
            if w in _COMMON or len(w) < 3 or w in lower_words:
                continue
            initial = m.start() == 0 or _SENTENCE_START.search(text, max(0, m.start() - 3), m.start()) is not None
            out.append((words[0], initial, kind))
            continue
        else:  # drop leading common words ("The Lisbon office" -> "Lisbon")
            while words and words[0].casefold() in _COMMON:
                words.pop(0)
            while words and words[-1].casefold() in _COMMON:
                words.pop()
            if not words:
                continue
            term = " ".join(words)
            if len(words) == 1 and (term.casefold() in _COMMON or len(term) < 3):
                continue
        out.append((term, False, kind))
    return out


# what names a thing: "called Biscuit", "named biscuit", "her name is Biscuit", "goes by Bis"
_NAMED = lazy(r"\b(?:called|named|nicknamed|name\s+is|name['’]s|goes\s+by|known\s+as)\s+"
                    r"([A-Za-z][\w'’\-]*(?:\s+[A-Z][\w'’\-]*)?)")
# nouns whose label or apposition marks a name: pets, family, people around the user, their places
_NAMED_NOUNS = (r"pet|pets|dog|dogs|puppy|cat|cats|kitten|horse|pony|bird|parrot|rabbit|bunny|hamster|fish|"
                r"turtle|tortoise|snake|lizard|ferret|son|daughter|kid|kids|child|children|baby|wife|husband|"
                r"partner|spouse|boyfriend|girlfriend|fianc[ée]e?|sister|brother|sibling|twin|mother|mom|mum|"
                r"father|dad|parent|grandma|grandpa|grandmother|grandfather|aunt|uncle|cousin|niece|nephew|"
                r"friend|best friend|boss|manager|colleague|coworker|roommate|flatmate|neighbou?r|nickname|"
                r"employer|company|school|university|hometown|street|neighbou?rhood")
# "Pet: Biscuit", "- dog - Biscuit", "Sister's name: Imogen"
_LABELLED = lazy(rf"(?im)^[ \t]*(?:[-*•][ \t]*)?(?:\w+['’]s[ \t]+)?(?:{_NAMED_NOUNS})(?:['’]s[ \t]+name)?"
                       r"[ \t]*[:=\-–—][ \t]*([A-Za-z][\w'’\-]*(?:[ \t]+[A-Z][\w'’\-]*)?)")
# "Biscuit is Ann's dog", "Biscuit, her dog", "Biscuit (the user's cat)"
_APPOSED = lazy(rf"\b([A-Z][\w'’\-]*[a-z][\w'’\-]*)(?:\s*[,(]\s*|\s+(?:is|was)\s+)(?:also\s+)?"
                      rf"(?:[A-Z]\w*['’]s|her|his|my|their|our|the\s+user['’]s)\s+(?:\w+\s+)?(?:{_NAMED_NOUNS})\b")
# "Biscuit loves walks": a capitalised word opening a sentence, then a verb only people and pets do
_ANIMATE = lazy(r"(?:^|[.!?;\n]\s*)([A-Z][a-z][\w'’\-]*)\s+(?:loves|adores|hates|barks|meows|purrs|sleeps|"
                      r"naps|fetches|chases|bites|cuddles|snores|likes\s+to|enjoys)\b")
_NOT_CUED = {"it", "me", "him", "her", "them", "us", "you", "after", "off", "out", "up", "back", "in", "on", "for",
             "a", "an", "the", "this", "that", "by", "to", "as", "because", "something", "anything"}


def _cue_terms(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    """(term, kind, span) of what a cue in ``text`` marks as a name, whatever its case or place
    in the sentence (see the module docstring)."""
    out = []
    for pattern in (_NAMED, _LABELLED, _APPOSED, _ANIMATE):
        for m in pattern.finditer(text):
            term = re.sub(r"['’]s$", "", m.group(1)).strip("'’-")
            words = term.split()
            while words and words[-1].casefold() in _COMMON | _NOT_CUED:
                words.pop()
            if not words or words[0].casefold() in _COMMON | _NOT_CUED or len(words[0]) < 2:
                continue
            term = " ".join(words)
            out.append((term[0].upper() + term[1:], "name", m.span(1)))
    return out


def private_terms_from(user: str, *, human: str | None, blocks: Iterable[str],
                       memories: Iterable[tuple[str, str | None]], nodes: Iterable[tuple[str, str | None]],
                       objects: Iterable[str]) -> Terms:
    """The names and places of ``user``'s private content (see the module docstring), from the
    raw inputs: ``human`` (their ``human`` block's text), ``blocks`` (the texts of their other
    private blocks), ``memories`` ((text, subject) of their newest memories, newest first),
    ``nodes`` ((name, type) of their graph nodes) and ``objects`` (the objects of their facts).
    A :class:`Terms` set (``.kinds``: term -> "name" | "place").  Pure: gathering the inputs
    from a store is :func:`brandmind.privacy.gather_private_terms`."""
    terms = Terms()
    texts: list[str] = [human] if human else []
    texts.extend(blocks)
    if human:
        _human_terms(terms, human)
    for text, subject in memories:
        texts.append(text)
        if subject and subject.casefold() not in _COMMON and subject.casefold() not in ("i", "me", user.casefold()):
            terms.add_term(subject, "name")
    node_kinds = _node_terms(terms, nodes)
    # objects of facts: places when the graph says so, else names if they look proper
    for obj in objects:
        if obj in node_kinds or not obj[:1].isupper() or obj.casefold() in _COMMON or len(obj) > 80:
            continue
        terms.add_term(obj, "private")
    _text_terms(terms, texts)
    return terms


def _human_terms(terms: Terms, human: str) -> None:
    """The user's own name from the ``name:`` lines of their human block, whole and in parts."""
    for m in _NAME_LINE.finditer(human):
        value = m.group(1).strip().strip(".")
        if value and value[0].isupper() and len(value) <= 80:
            terms.add_term(value, "name")
            for part in value.split():  # every capitalised part, even "Will" (then matched as written)
                part = part.strip(".,")
                if len(part) >= 2 and part[0].isupper() and part.casefold() not in ("user", "name"):
                    terms.add_term(part, "name")


def _node_terms(terms: Terms, nodes: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """Graph nodes that are places or people, added to ``terms``; name -> kind."""
    node_kinds = {}
    for name, type_ in nodes:
        t = (type_ or "").casefold()
        if t in _PLACE_TYPES:
            node_kinds[name] = "place"
        elif t in _PERSON_TYPES:
            node_kinds[name] = "name"
    for name, kind in node_kinds.items():
        if name.casefold() not in _COMMON and len(name) >= 2:
            terms.add_term(name, kind)
    return node_kinds


def _text_terms(terms: Terms, texts: list[str]) -> None:
    """What cues mark as names in ``texts``, and their proper nouns; then which one-word terms
    are everyday words too (matched only as written)."""
    lower_words: set[str] = set()
    cued: list[tuple[str, str]] = []
    for text in texts:
        spans = []
        for term, kind, span in _cue_terms(text):
            cued.append((term, kind))
            spans.append(span)
        for a, b in reversed(spans):  # the cued word itself is no everyday use of it
            text = text[:a] + " " + text[b:]
        lower_words.update(w for w in re.findall(r"\b[a-z][\w'’\-]*", text))
    for term, kind in cued:
        terms.add_term(term, kind)
    # a single capitalised word seen only at the start of sentences is ambiguous ("Lives near
    # ...", "Prefers ..."): taken only when it is also capitalised mid-sentence somewhere
    found = [pair for text in texts for pair in _proper_nouns(text, lower_words)]
    mid_sentence = {term for term, initial, _ in found if not initial}
    for term, initial, kind in found:
        if not initial or term in mid_sentence:
            terms.add_term(term, kind)
    # a name that is also an everyday word (Will, Mark, Rose, Bill) matches only as written:
    # case-insensitively it would refuse every note with "will" in it
    terms.exact.update(t for t in terms if " " not in t and (t.casefold() in lower_words or t.casefold() in _COMMON))
