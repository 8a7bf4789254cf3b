"""Keeping credentials out of everything flowtui writes or shows.

One rule for the whole of flowtui. A credential is:

- the value of an environment variable whose name looks like one
  (``*_API_KEY``, ``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
  ``*PASSWD*``, ``*CREDENTIAL*``, ``*PRIVATE*``; at least 6 characters; not
  one named for a place, ``*_DIR``, ``*_PATH``, ``*_FILE``, ``*_HOME``,
  ``*_CACHE``, nor one holding the path of a file or folder that exists),
  each long line of such a value when it spans several (a PEM key), the
  value URL-encoded (a tool puts it in a query string), and a piece of a long
  one (any run of 19 or more of its characters: a tool printing a key's end);
- a credential-looking keyword a provider was given (``api_key=...``): the
  provider hands it to :func:`credentials_given` when it is made, and from then on this
  process redacts it everywhere, as it does the environment's;
- anything shaped like one, whatever it is called: ``sk-…``/``rk-…``/``pk-…``,
  ``ghp_…``/``github_pat_…``, ``xoxb-…``/``xoxp-…``, ``AKIA…``, ``hf_…``,
  ``Bearer …``, a JWT, a PEM private-key block, the password part of a
  connection URL (``scheme://user:PASSWORD@host``), and the value of a URL's query
  parameter named like one (``?key=…``, ``&access_token=…``, ``&sig=…``).

Each is replaced by ``[redacted]``. Text is redacted with :func:`redact`;
structured data (an event, a snapshot, a cassette exchange) with
:func:`redact_data`, *before* it is encoded: JSON or TOML escaping changes the
bytes of a value holding ``"``, ``\\`` or a newline, so redacting the encoded
text would miss it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from flowtui.runtime.placeholders import put_back, shown_with

MARK = "[redacted]"
SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE)", re.IGNORECASE)
# ...unless the name says it holds a place: TIKTOKEN_CACHE_DIR (litellm sets it when imported), HF_TOKEN_PATH,
# GOOGLE_APPLICATION_CREDENTIALS_FILE. A path taken for a key was hidden wherever it showed, and held a
# streamed reply back at every three letters of it (a reply saying "lib" held at a path through /usr/lib).
PLACE_NAME = re.compile(r"_(DIR|DIRECTORY|PATH|FILE|HOME|CACHE)$", re.IGNORECASE)
MIN_LENGTH = 6
_LINE_MIN = 16  # a line of a multi-line secret this long is a secret of its own

# What a URL's query parameter holding a credential is named, at its end (api_key, access_token, x-api-key).
_QUERY_NAMES = ("key", "token", "secret", "password", "passwd", "sig", "signature", "auth", "authorization",
                "credential", "credentials")
# Shapes that are credentials whatever they are called. Group "keep" (when
# present) is kept in front of the redaction: the scheme and user of a URL, "Bearer ".
# A key glued to what comes before it is a key too: JSON's "\nsk-..." (the n of an escaped newline),
# a colour code's "\x1b[33msk-...", "token_ghp_...". Where no word boundary comes first, a shape
# that ordinary words could take (a kebab-case name after "desk") needs a digit and more length.
# Every shape fails fast where it starts: a lookahead or a scan to the end of a run of letters, tried at
# each of the run's positions, made "ask-" * 20,000 (an 80 KB reply) take 9 s, a live run's every event
# and `flowtui diff` minutes. So a lookahead is bounded, and a shape that may be long starts a run.
_SHAPES = [
    # "*" inside: a provider's error masks the middle ("sk-proj-****abcd"); never last: "**sk-...**" is bold
    # (or right after a colour code, "\x1b[31msk-...", whose m is glued to it)
    r"(?:\b|(?<=[0-9;\[]m))(?:sk|rk|pk)-[A-Za-z0-9_\-*]{5,}[A-Za-z0-9_\-]",
    # (a key of this length with no digit in its first 100 characters: about 1 in 50 million)
    r"(?:sk|rk|pk)-(?=[A-Za-z_\-]{0,100}[0-9])[A-Za-z0-9_\-]{20,}",
    r"gh[pousr]_[A-Za-z0-9]{16,}",
    r"github_pat_[A-Za-z0-9_]{16,}",
    r"xox[abposr]-[A-Za-z0-9-]{8,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])",
    r"\bhf_[A-Za-z0-9]{16,}",
    r"hf_(?=[A-Za-z]{0,100}[0-9])[A-Za-z0-9]{30,}",
    # where no letter or digit is glued before it (but an escaped line break's: "\neyJ..."), its header
    # (a few dozen characters) bounded: "eyJ" * 27,000 took 2 s
    r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))eyJ[A-Za-z0-9_-]{4,512}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    # (a token ends before a full stop: "Bearer sk-....  You can" lost the sentence's)
    r"(?P<bearer>\bBearer\s+)[A-Za-z0-9._~+/=-]{7,}[A-Za-z0-9_~+/=-]",
    # the password may hold a "/" (unescaped, as people write it); a port and a path (host:443/a/@b) is no password
    # (the password ends where another URL starts: "a://b:" * 13,000, each scanned to the end, took 7 s)
    r"(?P<url>\b[A-Za-z][A-Za-z0-9+.-]{0,40}://[^\s:/@\"']+:)(?![0-9]*/)(?:(?!://)[^\s@\"'])+(?=@)",
]
_SHAPE = re.compile("|".join(f"(?:{s})" for s in _SHAPES), re.DOTALL)
# Cheap test before the full pattern: every shape holds one of these.
_HINTS = ("sk-", "rk-", "pk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA", "ASIA", "hf_",
          "eyJ", "PRIVATE KEY", "Bearer", "://")
_HINT = re.compile("|".join(re.escape(h) for h in _HINTS))
# A query parameter named like a credential (an api_base given as "https://gw/v1?key=..."): its value. Looked
# for on its own, where a text holds "=" and "?" or "&" (C-speed tests): among the shapes, or its names among
# the hints, every text's look took 3.5 times as long, and one with an "=" (code) 24 times.
# (a word glued before the name is one of a few: monkey=, turkey= are no keys; a colon, a comma or a full
# stop that ends it is the sentence's: "at http://gw/v1?key=abc123: nothing listens")
# (a value redacted already is left as it is: it lost its "]" to the last character's class, and a text
# redacted again, a recorded tool result given back by a re-execution, read "[redacted]]" and diverged)
_QUERY = re.compile(
    rf"(?P<name>[?&](?i:(?:[A-Za-z0-9_.-]{{0,30}}[_.-])?(?:api|access|auth|refresh|id|client|session|private)?"
    rf"(?:{'|'.join(_QUERY_NAMES)}))=)(?!\[redacted\][:;,.)\]]*(?:[\s&#\"'<>]|$))"
    rf"[^\s&#\"'<>]{{3,}}[^\s&#\"'<>:;,.)\]]")

_QUERY_RAW = re.compile(_QUERY.pattern.encode())  # (on a line's bytes: JSON leaves ?, & and = as they are)


def _queried(text: str) -> bool:
    return "=" in text and ("?" in text or "&" in text)
_BIG = 1 << 16  # past this size, literal searches (C speed) beat one regular expression


def _hinted(text: str) -> bool:
    if len(text) < _BIG:
        return _HINT.search(text) is not None
    return any(h in text for h in _HINTS)


_KEYWORD = re.compile(r"key|token|secret|password|authorization|credential", re.IGNORECASE)


def _keyword_values(keywords: Mapping[str, Any], depth: int = 2) -> set[str]:
    """The values of the keywords named like a credential; in a mapping given as a keyword too
    (``extra_headers={"X-Gateway-Key": ...}``, ``Authorization``)."""
    out = {v for k, v in keywords.items() if isinstance(v, str) and len(v) >= MIN_LENGTH and _KEYWORD.search(str(k))}
    if depth:
        for v in keywords.values():
            if isinstance(v, Mapping):
                out |= _keyword_values(v, depth - 1)
    return out


class _Given:
    """The credentials code handed over (:func:`credentials_given`), and how many times they changed."""
    values: frozenset[str] = frozenset()
    version = 0


def credentials_given(keywords: Mapping[str, Any]) -> None:
    """Redact, from now on in this process, the credential-looking keywords of ``keywords`` (a
    provider's ``api_key=vault.key()``): a server echoing the key in a reply or an error showed it
    on screen and wrote it to the journal, since only the provider knew it for one."""
    new = _keyword_values(keywords) - _Given.values
    if new:
        _Given.values |= new
        _Given.version += 1
        environment_secrets.cache_clear()


def secret_values(extra: Mapping[str, Any] | None = None) -> list[str]:
    """Credential values from the environment, those code handed over (:func:`credentials_given`) and ``extra``
    keywords, longest first."""
    values = {v for k, v in os.environ.items()
              if SECRET_NAME.search(k) and not _a_place(k, v) and not _a_setting(k, v) and len(v.strip()) >= MIN_LENGTH}
    values |= _Given.values
    if extra:
        values |= _keyword_values(extra)
    for v in list(values):
        if "\n" in v.strip():  # a PEM key or a certificate: a tool may print one line of it
            values |= {line.strip() for line in v.splitlines() if len(line.strip()) >= _LINE_MIN}
        values |= {quoted for quoted in (quote(v, safe=""), quote_plus(v)) if quoted != v}  # in a URL's query
    return sorted(values, key=len, reverse=True)


def _a_place(name: str, value: str) -> bool:
    """Whether a variable named like a credential holds a place, not one: its name says so, or its value
    is a file or folder that exists (GOOGLE_APPLICATION_CREDENTIALS names the key's file; the file's
    content is the secret, and flowtui never reads it)."""
    if PLACE_NAME.search(name):
        return True
    value = value.strip()
    return value.startswith(("/", "~", ".")) and os.path.exists(os.path.expanduser(value))


def _a_setting(name: str, value: str) -> bool:
    """Whether a variable named for tokens holds a plain number, as a setting does (MAX_TOKENS=128000, a token
    limit): every 128000 a reply or a tool said was hidden, and a budget's max_tokens was journaled as
    ``[redacted]``. One named a password, a secret or a key holds a credential whatever it is (a PIN of
    digits), and a credential of digits alone is longer (an account token of 20 digits is one)."""
    value = value.strip()
    return len(value) < _NUMBER_MAX and value.replace(".", "", 1).isdigit() and _COUNT_NAME.search(name) is not None \
        and _STRONG_NAME.search(name) is None


_COUNT_NAME = re.compile(r"TOKEN", re.IGNORECASE)  # (MAX_TOKENS, TOKEN_LIMIT: a count of a model's tokens)
_STRONG_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|PRIVATE|CREDENTIAL|_KEY$|API_KEY", re.IGNORECASE)
_NUMBER_MAX = 12  # characters: a number shorter than this, in a variable named like a credential, is a setting


@functools.lru_cache(maxsize=1)
def environment_secrets() -> tuple[str, ...]:
    """:func:`secret_values` of this process's environment, read once (by what shows text from
    elsewhere: the app, ``flowtui diff``, a journal's notices)."""
    return tuple(secret_values())


def found(text: str, secrets: Iterable[str]) -> list[str]:
    """The credentials in ``text``, in the order they appear (what :func:`redact` replaces)."""
    return [text[a:b] for a, b in _spans(text, tuple(secrets))]


# A piece of a credential value is a credential too: a tool printing a key's end, an error quoting
# it split in two. A long value (a key, not a word) is looked for by aligned pieces of _PIECE
# characters every _STEP: any run of _PIECE + _STEP - 1 of its characters holds one, and a run
# found is widened to all it shares with the value.
_PIECE, _STEP = 12, 8
_PIECED = 24  # a value at least this long, without spaces


@functools.lru_cache(maxsize=256)
def _pieces(value: str) -> tuple[tuple[str, int], ...]:
    """The aligned pieces of ``value`` looked for, each with where it starts in it."""
    if len(value) < _PIECED or any(c.isspace() for c in value):
        return ()
    starts = list(range(0, len(value) - _PIECE + 1, _STEP))
    if starts[-1] != len(value) - _PIECE:
        starts.append(len(value) - _PIECE)
    return tuple((value[i:i + _PIECE], i) for i in starts)


def _spans(text: str, secrets: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where the credentials of ``text`` are, in order: (start, end), overlapping ones joined."""
    spans = []
    for value in secrets:
        at = text.find(value)
        while at >= 0:
            spans.append((at, at + len(value)))
            at = text.find(value, at + len(value))
        for piece, offset in _pieces(value):
            at = text.find(piece)
            while at >= 0:
                spans.append(_widened(text, value, at, offset))
                at = text.find(piece, at + 1)
    if _hinted(text):
        for m in _SHAPE.finditer(text):
            spans.append((m.start() + len(m.group("bearer") or m.group("url") or ""), m.end()))
    if _queried(text):
        spans.extend((m.start() + len(m.group("name")), m.end()) for m in _QUERY.finditer(text))
    spans.sort()
    joined: list[tuple[int, int]] = []
    for a, b in spans:
        if joined and a < joined[-1][1]:
            joined[-1] = (joined[-1][0], max(b, joined[-1][1]))
        else:
            joined.append((a, b))
    return joined


def _widened(text: str, value: str, at: int, offset: int) -> tuple[int, int]:
    """The run of ``text`` around ``at`` that matches ``value`` around ``offset``, as long as it goes."""
    a, v = at, offset
    while a > 0 and v > 0 and text[a - 1] == value[v - 1]:
        a, v = a - 1, v - 1
    b, v = at + _PIECE, offset + _PIECE
    while b < len(text) and v < len(value) and text[b] == value[v]:
        b, v = b + 1, v + 1
    return a, b


class Redactor:
    """The credentials of one process, ready to redact text and to tell quickly whether an
    encoded line may hold one (see :mod:`flowtui.runtime.encoding`)."""

    def __init__(self, values: Iterable[str], *, extra: Mapping[str, Any] | None = None,
                 follows: bool = False) -> None:
        self._extra, self._follows = extra, follows  # follows: takes in credentials handed over later
        self._set(values)

    def refresh(self) -> None:
        """Take in the credentials code handed over since (a provider made after the run began)."""
        if self._follows and self._version != _Given.version:
            self._set(secret_values(self._extra))

    def _set(self, values: Iterable[str]) -> None:
        self._version = _Given.version
        self.values = tuple(values)
        # credentials of digits alone: a number the flow keeps may be one (an account's token as an int)
        self.digits = tuple(v for v in self.values if v.isascii() and v.isdigit())
        # what an encoded line holds when it holds a credential: a shape's start, a value's longest part
        # JSON leaves as it is, a piece of a long value (a value with characters JSON escapes has none), and
        # the digits a float made of a credential of digits is written with (float(token) of 17 digits or
        # more: 8.392019483721938e+19, the credential's digits never whole)
        self._literals = tuple(h.encode() for h in _HINTS) + tuple(
            _fingerprint(value).encode("utf-8", "surrogatepass") for value in self.values) + tuple(
            piece.encode("utf-8", "surrogatepass") for value in self.values if _fingerprint(value) == value
            for piece, _ in _pieces(value)) + tuple(
            written.split("e")[0].encode() for v in self.digits if "e" in (written := repr(float(v))))
        self._marks = re.compile(b"|".join(re.escape(m) for m in self._literals))
        longest_first = sorted(self._literals, key=len, reverse=True)  # (at each place, the longest that starts)
        self._starts = re.compile(b"(?=(" + b"|".join(re.escape(m) for m in longest_first) + b"))")
        self._reach = max(map(len, self._literals)) - 1
        self._text_marks = re.compile("|".join(re.escape(m.decode("utf-8", "replace")) for m in self._literals))
        self.seen_clean: set[str] = set()  # short strings seen without a mark (names, origins, ids repeat)

    def clean_text(self, text: str) -> bool:
        """Whether a string holds nothing a credential could start from (memoized for short ones).
        Call :meth:`refresh` first (once per event: it is hot)."""
        if text in self.seen_clean:
            return True
        if _queried(text) and _QUERY.search(text) is not None:  # ?access_token=...: no mark of its own
            return False
        if len(text) >= _BIG:
            return not any(h in text for h in _HINTS) and not any(v in text for v in self.values) \
                and not any(piece in text for v in self.values for piece, _ in _pieces(v))
        if self._text_marks.search(text) is not None:
            return False
        if len(text) <= 64 and len(self.seen_clean) < 4096:
            self.seen_clean.add(text)
        return True

    @classmethod
    def from_environment(cls, extra: Mapping[str, Any] | None = None) -> "Redactor":
        """The process's credentials, now and as code hands more over."""
        return cls(secret_values(extra), extra=extra, follows=True)

    def may_hold(self, raw: bytes) -> bool:
        """Whether a JSON line may hold a credential (then it is redacted value by value)."""
        if b"=" in raw and (b"?" in raw or b"&" in raw) and _QUERY_RAW.search(raw) is not None:
            return True  # (a query parameter named like a credential: "GET /v1/items?access_token=...")
        if len(raw) < _BIG:
            return self._marks.search(raw) is not None
        return any(m in raw for m in self._literals)

    def straddles(self, line: bytes, at: int) -> bool:
        """Whether a mark :meth:`may_hold` looks for (a shape's start, a credential or a piece of one) lies
        across ``at`` in ``line``: a seam between two parts encoded and looked at apart, where one lying
        wholly in either part was seen. (A query parameter lies in a JSON string: in one part.)"""
        window = line[max(0, at - self._reach):at + self._reach]
        seam = min(at, self._reach)
        for m in self._starts.finditer(window):  # (each place a mark starts, its longest)
            if m.start() >= seam:
                return False
            if m.end(1) > seam:
                return True
        return False

    def redact(self, text: str) -> str:
        self.refresh()
        return redact(text, self.values)


def _fingerprint(value: str) -> str:
    """The longest part of ``value`` that JSON writes unchanged (so it is found in an encoded line)."""
    runs = re.split(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]', value)
    best = max(runs, key=len)
    return best if len(best) >= 4 else json.dumps(value, ensure_ascii=False)[1:-1]


_LONG = 1 << 20  # characters: a text this long is remembered redacted (see ``redact``)
_recent: list[tuple[str, tuple[str, ...], str]] = []  # the last two long texts redacted: (text, with, result)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every credential replaced by ``[redacted]``.

    A long text is remembered: the same 50 MB tool output goes out in four events (the tool's end,
    the history, ``ctx.turn``, ``ctx.output``), and redacting one full of keys takes seconds."""
    if len(text) < _LONG:
        return _redact(text, secrets)
    secrets = tuple(secrets)
    for seen, with_, result in _recent:
        if seen is text and with_ == secrets:
            return result
    result = _redact(text, secrets)
    _recent[:] = [(text, secrets, result), *_recent[:1]]
    return result


def _redact(text: str, secrets: Iterable[str]) -> str:
    secrets = tuple(secrets)
    if not _hinted(text) and not _queried(text) and not any(value in text for value in secrets) \
            and not any(piece in text for value in secrets for piece, _ in _pieces(value)):
        return text  # most texts: a few searches at C speed
    out, last = [], 0
    for a, b in _spans(text, secrets):
        out += (text[last:a], MARK)
        last = b
    out.append(text[last:])
    return "".join(out)


# The start of a credential shape at the end of a text still arriving (a streamed reply).
_PARTIAL_SHAPE = re.compile(
    r"(?:\b(?:sk|rk|pk)-[A-Za-z0-9_\-*]*|\bgh[pousr]_\w*|\bgithub_pat_\w*|\bxox[a-z]-[\w-]*|\b(?:AKIA|ASIA)\w*"
    r"|\bhf_\w*|\beyJ[\w.-]*|\bBearer\s+\S*|-----BEGIN[^\n]*PRIVATE KEY-----[\s\S]*)\Z")
_PARTIAL_MIN = 3


def redact_streaming(text: str, secrets: Iterable[str]) -> str:
    """:func:`redact` for a text still arriving in fragments (a streamed reply).

    A credential split over fragments is whole only at the end; until then,
    the end of the text may hold its first characters. They are hidden too: a
    tail that begins a credential value or a credential shape.
    """
    secrets = tuple(secrets)
    text = redact(text, secrets)
    for value in secrets:
        for k in range(min(len(value) - 1, len(text)), _PARTIAL_MIN - 1, -1):
            if text.endswith(value[:k]):
                return text[:-k] + MARK
    return _PARTIAL_SHAPE.sub(MARK, text) if "-" in text or "_" in text or "eyJ" in text or "Bearer" in text \
        else text


class StreamRedactor:
    """A text arriving in fragments (a streamed reply), passed on redacted as it comes, for a reader
    that joins the pieces (the app): each piece given out is final, and the pieces joined are the whole
    text redacted. A tail that may be part of a credential value (three characters of it or more,
    anywhere in it: :func:`redact` hides a long enough piece of one too) is held back until the text
    says whether it is; a credential whose first one or two characters went out already has the rest
    hidden. So is the word the text ends in (a key of a shape, ``sk-proj-...``, is whole only when a
    character no key holds comes after it: given out as it grew, its tail went out in clear once its
    start was redacted), and a private key's block until its end. The app cannot do this itself: only
    the flow's process knows a key handed over as ``api_key=``.

    ``words=False``: the word the text ends in is given out unless it begins a credential's shape or
    is a part of a credential value (a line printed in pieces: ``waiting``, ``working``, each written
    over the last, would never be shown)."""

    __slots__ = ("_held", "_size", "_word", "_sent", "_words")

    def __init__(self, *, words: bool = True) -> None:
        self._held: list[str] = []  # the tail held back, in the pieces it came in
        self._size = 0  # its length
        self._word = 0  # how long the word the text ends in is (it may be a key still arriving)
        self._sent = ""  # the last characters given out (a credential may have begun there)
        self._words = words

    def feed(self, text: str, secrets: tuple[str, ...]) -> str:
        self._held.append(text)
        self._size += len(text)
        start = len(text)
        while start and text[start - 1] in _WORD:
            start -= 1
        self._word = len(text) - start if start else self._word + len(text)
        if self._words and self._word >= self._size:  # all of it one word still arriving (a long one: not
            return ""  # joined again each time)
        held, before = "".join(self._held), self._sent
        # the end that may begin a credential, looked for across what went out already too
        window = (before + held)[-_SHAPE_WINDOW:]
        begun = _PARTIAL_SHAPE.search(window) if _HINT.search(window) or "-----BEGIN" in window else None
        hold = min(max(_inside_one(before + held, secrets), self._word if self._words else 0,
                       len(window) - begun.start() if begun else 0), len(held))
        self._held, self._size = ([held[len(held) - hold:]], hold) if hold else ([], 0)
        return self._give(held[:len(held) - hold], secrets)

    @property
    def held(self) -> int:
        """How many characters are held back."""
        return self._size

    def end(self, secrets: tuple[str, ...]) -> str:
        """The text is whole: what was held back, redacted (a reply cut short leaves it unsaid)."""
        held, self._held, self._size, self._word = "".join(self._held), [], 0, 0
        return self._give(held, secrets)

    def _give(self, ready: str, secrets: tuple[str, ...]) -> str:
        if not ready:
            return ""
        before = self._sent
        out, given = redact(before + ready, secrets), redact(before, secrets)  # (as it went out)
        if out.startswith(given):
            out = out[len(given):]
        else:  # a credential began in what went out (its first two characters at most): the rest is hidden
            at = out.find(MARK, max(0, len(given) - (_PARTIAL_MIN - 1)))
            out = out[at:] if at >= 0 else out[len(given):]
        keep = max(map(len, secrets), default=1) - 1
        self._sent = (before + ready)[-keep:] if keep else ""
        return out


# What a key of a shape is made of: a word of these is held back whole in a stream (see StreamRedactor); with
# a query's ? and &, so its "?key=" is there when the value is looked at (it went out before, and the key after)
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-*.~+/=?&")
_SHAPE_WINDOW = 16_384  # how far back a stream's partial shape is looked for (a private key's block fits)


def _inside_one(text: str, secrets: tuple[str, ...]) -> int:
    """The length of the longest end of ``text`` that is a part of a credential value (not all of it),
    if it is three characters or more; 0 otherwise."""
    best = _PARTIAL_MIN - 1
    for value in secrets:
        if text[-_PARTIAL_MIN:] not in value:  # (most texts: one search)
            continue
        for k in range(min(len(value) - 1, len(text)), best, -1):
            if text[-k:] in value:
                best = k
                break
    return best if best >= _PARTIAL_MIN else 0


def redact_data(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of JSON-shaped ``value`` (dicts, lists or tuples, strings, numbers) with every string redacted."""
    secrets = tuple(secrets)
    return _walk(value, secrets)


def _walk(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {(redact(k, secrets) if isinstance(k, str) else k): _walk(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, secrets) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, secrets) for v in value)
    return value


def restore(edited: str, original: str, secrets: Iterable[str]) -> str:
    """``edited`` (typed over ``redact(original)``) with each untouched ``[redacted]`` back to its credential.

    An edit made on a redacted text then loses nothing: the credentials the
    person never saw go back where they were, each followed through the edit
    (:mod:`flowtui.runtime.placeholders`): one whose ``[redacted]`` was deleted does not
    come back in another's place, and a ``[redacted]`` the text held as it is stays so.
    """
    secrets = tuple(secrets)
    if MARK not in edited:
        return edited
    spans = _spans(original, secrets)
    if not spans:
        return edited
    shown, hidden = shown_with(original, [(a, b, MARK) for a, b in spans])
    return put_back(edited, shown, hidden)
