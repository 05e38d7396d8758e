"""The PII guard for shared persona blocks: pure functions, regular expressions only.

``scan(text, private_terms=...)`` finds spans that must not reach a block other users read:

=========  ==================================================================================
kind       what (each rule is a function in :data:`RULES`; tests switch rules off one by one)
=========  ==================================================================================
email      ``ann@example.com``; ``ann [at] example [dot] com`` and ``ann at example dot com``
phone      international (``+44 20 7946 0958``, ``0044 ...``), North American
           (``(415) 555-0132``, ``415.555.0132``), European trunk-0 numbers
           (``020 7946 0958``, ``06 12 34 56 78``, ``030 12345678``), and any digit run of
           6-15 digits after a label (phone, tel, mobile, cell, fax, whatsapp, call, text me,
           reach ... at).  Never dates, years, prices, percentages, counts, times or versions:
           the unlabelled forms need a ``+``/``00`` prefix, the 3-3-4 shape or a trunk 0 with
           9-11 digits, and date shapes are dropped
address    house number + up to 4 capitalised name words + a street type (``123 Main St``,
           ``42 W 5th Avenue, Apt 3B``), PO boxes, German/Dutch/Nordic suffix streets with a
           number (``Hauptstraße 12``, ``Kerkstraat 5``), Romance street types with a number
           before or after (``15 rue de Rivoli``, ``Calle Mayor 5``, ``Via Roma 10``), US
           "City, ST 12345" and UK postcodes
card       13-19 digits (spaces or dashes allowed) starting 2-6 that pass the Luhn check
account    IBANs whose mod-97 checksum holds; runs of 6-17 digits after account / acct /
           a/c / routing / ABA / sort code / BSB / member or customer or policy number;
           US SSNs (``123-45-6789``) and labelled passport / licence / national insurance numbers
secret     known key shapes (``sk-``, ``sk_live_``, ``AKIA``, ``ghp_``/``github_pat_``,
           ``xox?-``, ``AIza``, ``glpat-``, ``hf_``, JWTs, ``-----BEGIN ... PRIVATE KEY-----``,
           ``Bearer`` tokens, credentials in URLs), ``password: <value>`` with a non-word value,
           and high-entropy tokens of 20+ characters within 40 characters of key / token /
           secret / password / credential
name       honorific + name (``Dr. Patel``), ``my name is ...``, ``name: ...``; and private
place      terms given with a kind (see ``brandmind.piiterms.private_terms_from``)
private    a private term given without a kind
=========  ==================================================================================

Private terms match case-insensitively as whole words, except a one-word name that is also an
everyday word of the user's texts (Will, Mark, Rose: :attr:`Terms.exact`), which matches only
as written.  Overlapping hits are resolved by
kind priority (secret > card > account > email > phone > address > name/place/private), then
length.  ``redact(text, hits)`` replaces each span with ``[REDACTED:<kind>]``.

The writer's own names and places (their private blocks and memories, the subjects and
objects of their facts, their graph nodes) come from ``private_terms_from`` (pure, in
``brandmind.piiterms``, re-exported here); ``brandmind.privacy.gather_private_terms(store,
user)`` reads its inputs from a store and caches them until the next op is applied.

Speed: tens of thousands of sentences a second (`python scripts/bench_speed.py --only text` measures it).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping

from .lazyre import lazy
from .piiterms import MEMORY_LIMIT, Terms, private_terms_from

__all__ = ["KINDS", "Hit", "Terms", "RULES", "MEMORY_LIMIT", "scan", "redact", "describe", "find_private",
           "private_terms_from"]

KINDS = ("email", "phone", "address", "card", "account", "secret", "name", "place", "private")
_PRIORITY = {"secret": 0, "card": 1, "account": 2, "email": 3, "phone": 4, "address": 5,
             "name": 6, "place": 6, "private": 6}


@dataclass(frozen=True)
class Hit:
    start: int
    end: int
    kind: str
    text: str

    def as_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "kind": self.kind, "text": self.text}


def _hit(m: re.Match, kind: str, group: int = 0) -> Hit:
    return Hit(m.start(group), m.end(group), kind, m.group(group))


# -- e-mail -------------------------------------------------------------------------------------
# quantifiers are bounded (an e-mail's local part is at most 64 characters) so that a long run
# of word characters cannot make a pattern quadratic
_EMAIL = lazy(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
                    r"\.[A-Za-z]{2,24}\b")
_EMAIL_SPELLED = lazy(
    r"\b[A-Za-z0-9][\w.+-]{0,63}\s*(?:\[at\]|\(at\)|\{at\}|\s+at\s+)\s*[A-Za-z0-9-]{1,63}"
    r"(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|\s+dot\s+)\s*[A-Za-z0-9-]{1,63}){0,4}"
    r"\s*(?:\[dot\]|\(dot\)|\{dot\}|\s+dot\s+)\s*(?:com|org|net|io|co|edu|gov|de|fr|uk|nl|es|it|info|biz)\b",
    re.IGNORECASE)


def find_emails(text: str) -> list[Hit]:
    if "@" not in text and "at" not in text.lower():
        return []
    return [_hit(m, "email") for m in _EMAIL.finditer(text)] + \
        [_hit(m, "email") for m in _EMAIL_SPELLED.finditer(text)]


# -- phone numbers ------------------------------------------------------------------------------
_SEP = r"[ \t.\-\u00a0]"
_INTL = lazy(rf"(?<![\w+])(?:\+|\b00)[1-9]\d{{0,2}}(?:{_SEP}?\(?\d{{1,5}}\)?){{2,6}}(?![\w%])")
_NANP = lazy(rf"(?<![\w+$€£.\-])(?:1{_SEP}?)?(?:\(\d{{3}}\){_SEP}?|\d{{3}}{_SEP})\d{{3}}{_SEP}\d{{4}}(?![\w%]|[.\-]\d)")
_TRUNK = lazy(rf"(?<![\w+$€£.,\-])\(?0\d{{1,4}}\)?(?:{_SEP}?\d{{2,8}}){{1,4}}(?![\w%]|[.,\-]\d)")
_PHONE_LABEL = lazy(
    r"\b(?:phone|tel|telephone|mobile|cell|cellphone|fax|whatsapp|sms|landline|hotline|"
    r"call(?:ed)?|ring|text(?:ed)?|reach(?:ed|able)?(?:\s+\w+){0,3}\s+(?:at|on)|ph|mob|"
    r"(?:my|his|her|their|your)\s+(?:work\s+|home\s+|private\s+|direct\s+)?number)"
    r"\b\.?(?:\s+(?:number|no\.?|nr\.?|#))?(?:\s+(?:is|was|at|on))?\s*[:#=]?\s*"
    r"((?:\+|00)?\(?\d[\d \t.\-()\u00a0]{4,20}\d)(?![\w%])", re.IGNORECASE)
_DATEISH = lazy(r"^\(?\d{1,4}\)?[./\-]\d{1,2}[./\-]\d{1,4}$")


def _digits(s: str) -> int:
    return sum(ch.isdigit() for ch in s)


def find_phones(text: str) -> list[Hit]:
    if _digits(text) < 6:
        return []
    hits = []
    for m in _INTL.finditer(text):
        if 8 <= _digits(m.group()) <= 15:
            hits.append(_hit(m, "phone"))
    for m in _NANP.finditer(text):
        hits.append(_hit(m, "phone"))
    for m in _TRUNK.finditer(text):
        s = m.group()
        if not 9 <= _digits(s) <= 11 or _DATEISH.match(s):
            continue
        if re.fullmatch(r"0\d+", s) and not _near(text, m.start(), _PHONEY, 30):  # a bare digit run
            continue
        hits.append(_hit(m, "phone"))
    for m in _PHONE_LABEL.finditer(text):
        s = m.group(1)
        if 6 <= _digits(s) <= 15 and not _DATEISH.match(s.strip()):
            hits.append(_hit(m, "phone", 1))
    return hits


_PHONEY = lazy(r"\b(?:phone|tel|mobile|cell|call|number|fax|whatsapp|text)\b", re.IGNORECASE)


def _near(text: str, pos: int, pattern: re.Pattern, window: int) -> bool:
    return pattern.search(text, max(0, pos - window), pos) is not None


# -- street addresses -----------------------------------------------------------------------------
_STREET_TYPES = (r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|"
                 r"Way|Terrace|Ter|Parkway|Pkwy|Highway|Hwy|Square|Sq|Circle|Cir|Trail|Trl|Crescent|"
                 r"Cres|Close|Row|Alley|Plaza|Pike|Gardens|Grove|Mews|Walk|Hill|Broadway")
_US_ADDRESS = lazy(
    rf"\b\d{{1,6}}[A-Za-z]?(?:-\d{{1,5}})?,?\s+(?:(?:[NSEW]|N[EW]|S[EW])\.?\s+)?"
    rf"(?:(?:[A-Z][\w'.\-]*|\d{{1,3}}(?:st|nd|rd|th))\s+){{0,4}}"
    rf"(?:{_STREET_TYPES})\b\.?(?![\-\w])"
    rf"(?:\s+(?:[NSEW]|N[EW]|S[EW])\b\.?)?"
    rf"(?:,?\s*(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Flat|Room|Rm|#)\.?\s*#?[\w\-]+)?")
_BROADWAY = lazy(r"\b\d{1,6}\s+Broadway\b")
_PO_BOX = lazy(r"\b(?:P\.?\s?O\.?\s*Box|Post\s+Office\s+Box|Postfach|Apartado(?:\s+de\s+Correos)?|"
                     r"Bo[iî]te\s+Postale|BP)\s*#?\s*\d{1,7}\b", re.IGNORECASE)
_SUFFIX_STREET = lazy(
    r"\b[A-ZÄÖÜÅØÆ][\wäöüßåøæ\-]*(?:straße|strasse|str\.|gasse|weg|allee|platz|ring|damm|ufer|"
    r"chaussee|steig|straat|laan|gracht|plein|kade|singel|dijk|vej|gade|gatan|gata|vägen|veien|gate)"
    r"\s+\d{1,4}\s?[a-zA-Z]?\b")
_ROMANCE_TYPES = (r"rue|avenue|av\.|boulevard|bd|chemin|allée|impasse|quai|cours|calle|c/|avenida|avda\.|"
                  r"plaza|paseo|carrer|camino|via|viale|piazza|piazzale|corso|largo|vicolo|rua|travessa|"
                  r"praça|alameda|estrada|ulica|ul\.")
_PARTICLES = r"(?:(?:de|del|dels|della|delle|dei|des|du|la|le|les|da|do|dos|das|di|degli|d'|l')\s*)*"
_ROMANCE_NAME = r"[A-ZÀ-ÝŁŚŻ][\w'À-ÿłśżźćńó\-]*(?:\s+[A-ZÀ-ÝŁŚŻ][\w'À-ÿłśżźćńó\-]*){0,3}"
_ROMANCE_BEFORE = lazy(
    rf"\b\d{{1,4}}(?:\s?(?:bis|ter))?,?\s+(?:{_ROMANCE_TYPES})\s+{_PARTICLES}{_ROMANCE_NAME}", re.IGNORECASE)
_ROMANCE_AFTER = lazy(
    rf"\b(?:{_ROMANCE_TYPES})\s+{_PARTICLES}{_ROMANCE_NAME},?\s+(?:n[º°.o]\s*)?\d{{1,4}}[a-zA-Z]?\b(?![.,]?\d|\s*%)",
    re.IGNORECASE)
_US_STATES = ("AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|"
              "NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY")
_CITY_STATE_ZIP = lazy(rf"\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*,\s*(?:{_US_STATES})\s+\d{{5}}(?:-\d{{4}})?\b")
_UK_POSTCODE = lazy(r"\b(?!FY\d\d\b)[A-PR-UWYZ][A-HK-Y]?\d[A-Z\d]?\s\d[ABD-HJLNP-UW-Z]{2}\b")


def find_addresses(text: str) -> list[Hit]:
    hits = []
    has_digit = any(ch.isdigit() for ch in text)
    if not has_digit:
        return []
    for rx in (_US_ADDRESS, _BROADWAY, _PO_BOX, _SUFFIX_STREET, _ROMANCE_BEFORE, _ROMANCE_AFTER,
               _CITY_STATE_ZIP, _UK_POSTCODE):
        hits.extend(_hit(m, "address") for m in rx.finditer(text))
    return [h for h in hits if not _GENERIC_ROMANCE.match(h.text)
            and not (re.match(r"(?:19|20)\d\d\s", h.text)
                     and _YEAR_BEFORE.search(text, max(0, h.start - 8), h.start))]


# "avenue 2" / "via 3" as in "via 3 channels": Romance types need a capitalised name word
_GENERIC_ROMANCE = lazy(r"^(?i:via|cours|plaza|largo|camino)\s+[a-z]")
# "in 2023 Fifth Avenue rents rose": a year after a time preposition is not a house number
_YEAR_BEFORE = lazy(r"\b(?:in|since|by|during|until|till|before|after|of|from|to|for|and)\s+$", re.IGNORECASE)


# -- card numbers -------------------------------------------------------------------------------
_CARD = lazy(r"(?<![\d\-.,])(?:[2-6]\d{3}(?:[ \-]?\d){9,15})(?![\d\-]|[.,]\d)")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def find_cards(text: str) -> list[Hit]:
    if _digits(text) < 13:
        return []
    hits = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn_ok(digits):
            hits.append(_hit(m, "card"))
    return hits


# -- account numbers ----------------------------------------------------------------------------
_IBAN = lazy(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
_NUMBER_WORDS = r"(?:number|numbers|no\.?|nr\.?|num|#|id|ref)"
_ACCOUNT_LABEL = lazy(
    # bank words take a bare digit run ("account 12345678"); the weaker ones need a number word
    r"\b(?:(?:bank\s+)?(?:account|acct|acc|a/c|routing|aba|sort\s*code|bsb|iban|savings|checking|chequing)"
    rf"(?:\s+{_NUMBER_WORDS})?|(?:member(?:ship)?|customer|policy|loyalty|client|invoice|contract)\s+{_NUMBER_WORDS})"
    r"\s*(?:is|was|:|=|#|ending\s+in)?\s*"
    r"((?:\d[ \-]?){5,16}\d)(?![\w%]|[.,]\d)", re.IGNORECASE)
_SSN = lazy(r"(?<![\d\-])\d{3}-\d{2}-\d{4}(?![\d\-])")
_ID_LABEL = lazy(
    r"\b(?:ssn|social\s+security(?:\s+number)?|passport(?:\s+(?:number|no\.?))?|"
    r"driver'?s?\s+licen[cs]e(?:\s+(?:number|no\.?))?|national\s+insurance(?:\s+number)?|ni\s+number|"
    r"tax\s+id|tin|ein|nif|nie|bsn|steuer-?id|codice\s+fiscale)\s*(?:is|was|:|=|#)?\s*"
    r"([A-Z0-9][A-Z0-9 \-]{5,18}[A-Z0-9])\b", re.IGNORECASE)


def iban_ok(candidate: str) -> bool:
    s = candidate.replace(" ", "")
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    try:
        number = int("".join(str(int(ch, 36)) for ch in moved))
    except ValueError:
        return False
    return number % 97 == 1


def find_accounts(text: str) -> list[Hit]:
    hits = []
    for m in _IBAN.finditer(text):
        if iban_ok(m.group()):
            hits.append(_hit(m, "account"))
    if _digits(text) >= 6:
        for m in _ACCOUNT_LABEL.finditer(text):
            hits.append(_hit(m, "account", 1))
        for m in _SSN.finditer(text):
            hits.append(_hit(m, "account"))
    for m in _ID_LABEL.finditer(text):
        if _digits(m.group(1)) >= 4:
            hits.append(_hit(m, "account", 1))
    return hits


# -- API keys and secrets -----------------------------------------------------------------------
_KEY_SHAPES = lazy(
    r"(?<![\w-])(?:sk-(?:proj-|ant-(?:api\d\d-)?|live-|test-|svcacct-)?[A-Za-z0-9_\-]{16,}"
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,}|SG\.[\w\-]{16,}\.[\w\-]{16,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})")
_PEM = lazy(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?")
_BEARER = lazy(r"\b(?:Bearer|Basic|token)\s+([A-Za-z0-9._~+/\-]{16,}=*)", re.IGNORECASE)
_URL_CREDS = lazy(r"\b[a-z][a-z0-9+.\-]{0,15}://[^\s:/@]{1,128}:([^\s/@]{1,256})@", re.IGNORECASE)
_PASSWORD = lazy(
    r"\b(?:password|passwd|pwd|passcode|passphrase|pin(?:\s+code)?|secret|api\s*key|token)\b"
    r"\s*(?:is|was|:|=|->|set\s+to)\s*(\"[^\"]{3,}\"|'[^']{3,}'|`[^`]{3,}`|[^\s\"'`]{4,})", re.IGNORECASE)
_SECRET_WORDS = lazy(r"(?:key|token|secret|passw|pwd|credential|auth|bearer|signature)", re.IGNORECASE)
_TOKEN = lazy(r"(?<![\w/+=\-.])[A-Za-z0-9+/_\-=.]{20,}(?![\w/+=\-])")


def shannon_bits(s: str) -> float:
    counts: dict[str, int] = {}
    for ch in s:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(token: str) -> bool:
    core = token.strip(".=-_")
    if len(core) < 20 or not any(ch.isdigit() for ch in core) or not any(ch.isalpha() for ch in core):
        return False
    if re.fullmatch(r"[\d.\-]+[a-z]?", core):  # numbers, versions
        return False
    if "." in core and re.fullmatch(r"[a-z0-9\-]+(?:\.[a-z0-9\-]+)+", core):  # host names
        return False
    pieces = [p for p in re.split(r"[\-_.:/]", core) if p]
    if len(pieces) >= 2 and all(len(p) <= 4 or _wordy(p) for p in pieces):
        return False  # a slug, path or model name made of words: weekly-visits-2024-q3, all-MiniLM-L6-v2
    return shannon_bits(core) >= 3.5


def _wordy(piece: str) -> bool:
    """A word, Capitalised or CamelCase (at most 3 capitals), not a random mix of cases."""
    return piece.isalpha() and sum(ch.isupper() for ch in piece) <= 3


def _password_value(value: str) -> bool:
    v = value.strip("\"'`")
    if value[0] in "\"'`":
        return len(v) >= 3
    if re.fullmatch(r"[a-z]+[.,;:!?]?", v) or re.fullmatch(r"[A-Z][a-z]+[.,;:!?]?", v):  # a plain word
        return False
    if re.fullmatch(r"\d{1,3}(?:[.,]\d+)?%?[.,;]?", v):  # "8" characters, "20%"
        return False
    return True


def find_secrets(text: str) -> list[Hit]:
    hits = [_hit(m, "secret") for m in _KEY_SHAPES.finditer(text)]
    if "-----BEGIN" in text:
        hits.extend(_hit(m, "secret") for m in _PEM.finditer(text))
    hits.extend(_hit(m, "secret", 1) for m in _BEARER.finditer(text) if _looks_random(m.group(1))
                or m.group(0).lower().startswith(("bearer", "basic")))
    if "://" in text:
        hits.extend(_hit(m, "secret", 1) for m in _URL_CREDS.finditer(text))
    for m in _PASSWORD.finditer(text):
        if _password_value(m.group(1)):
            hits.append(_hit(m, "secret", 1))
    if _SECRET_WORDS.search(text):
        for m in _TOKEN.finditer(text):
            if _looks_random(m.group()) and (_near(text, m.start(), _SECRET_WORDS, 40)
                                             or _SECRET_WORDS.search(text, m.end(), m.end() + 40)):
                hits.append(_hit(m, "secret"))
    return hits


# -- names (generic forms; the writer's own names come in as private terms) -----------------------
_HONORIFIC = lazy(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame|Herr|Frau|Mme|Mlle|Sr|Sra)\.?\s+"
                        r"[A-Z][a-z'\-]+(?:\s+[A-Z][a-z'\-]+)?")
_NAME_IS = lazy(r"\b(?:my\s+name\s+is|(?:user|client|customer|contact)(?:'s)?\s+(?:full\s+)?name\s+is|"
                      r"(?:full\s+)?name\s*:|goes\s+by|i\s+am\s+called)\s+([A-Z][a-z'\-]+(?:\s+[A-Z][a-z'\-]+){0,2})",
                      re.IGNORECASE)


def find_names(text: str) -> list[Hit]:
    hits = [_hit(m, "name") for m in _HONORIFIC.finditer(text)]
    for m in _NAME_IS.finditer(text):
        if m.group(1)[0].isupper():
            hits.append(_hit(m, "name", 1))
    return hits


RULES: dict[str, Callable[[str], list[Hit]]] = {
    "email": find_emails,
    "phone": find_phones,
    "address": find_addresses,
    "card": find_cards,
    "account": find_accounts,
    "secret": find_secrets,
    "name": find_names,
}


# -- private terms ------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _terms_regex(terms: tuple[str, ...], flags: int = re.IGNORECASE) -> re.Pattern | None:
    if not terms:
        return None
    alts = "|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t)))
    return re.compile(rf"(?<!\w)(?:{alts})(?!\w)", flags)


def find_private(text: str, private_terms: Iterable[str]) -> list[Hit]:
    """Whole-word, case-insensitive matches of the terms (``Terms.exact`` ones: as written)."""
    kinds: Mapping[str, str] = getattr(private_terms, "kinds", None) or (
        private_terms if isinstance(private_terms, Mapping) else {})
    exact: set[str] = getattr(private_terms, "exact", set())
    terms = {t.strip() for t in private_terms if isinstance(t, str) and len(t.strip()) >= 2}
    folded = {t.casefold(): kinds.get(t, "private") for t in terms}
    hits = []
    for group, flags in ((terms - exact, re.IGNORECASE), (terms & exact, 0)):
        rx = _terms_regex(tuple(sorted(group)), flags)
        if rx is not None:
            hits.extend(Hit(m.start(), m.end(), folded.get(m.group().casefold(), "private"), m.group())
                        for m in rx.finditer(text))
    return hits


# -- scan and redact ------------------------------------------------------------------------------
def scan(text: str, *, private_terms: Iterable[str] = ()) -> list[Hit]:
    """Every PII span of ``text``, in order, none overlapping (see the module docstring)."""
    if not text:
        return []
    found: list[Hit] = []
    for rule in RULES.values():
        found.extend(rule(text))
    if private_terms:
        found.extend(find_private(text, private_terms))
    found = [h for h in found if h.end > h.start]
    found.sort(key=lambda h: (_PRIORITY.get(h.kind, 9), -(h.end - h.start), h.start))
    kept: list[Hit] = []
    for h in found:
        if all(h.end <= k.start or h.start >= k.end for k in kept):
            kept.append(h)
    return sorted(kept, key=lambda h: h.start)


def redact(text: str, hits: Iterable[Hit]) -> str:
    """``text`` with each hit's span replaced by ``[REDACTED:<kind>]`` (overlaps merged)."""
    out, pos = [], 0
    for h in sorted(hits, key=lambda h: (h.start, -h.end)):
        if h.start < pos:  # overlapping an earlier span: extend it
            continue
        out.append(text[pos:h.start])
        out.append(f"[REDACTED:{h.kind}]")
        pos = h.end
    out.append(text[pos:])
    return "".join(out)


def describe(hits: Iterable[Hit], limit: int = 5) -> str:
    """``email 'ann@x.com', phone '+1 ...'`` for error messages."""
    hits = list(hits)
    parts = [f"{h.kind} {h.text!r} at {h.start}-{h.end}" for h in hits[:limit]]
    if len(hits) > limit:
        parts.append(f"and {len(hits) - limit} more")
    return ", ".join(parts)
