"""Turns query text into tokens.

Theory of operation: a single left-to-right scan with no backtracking. Each
token records its kind, its decoded value and the offset where it starts, so
the parser can point errors at the exact place. Keywords are matched without
regard to case and carry their upper-case spelling as value; the original text
is kept so a keyword may still serve as a property name after a dot (`c.value`).
Whitespace and `--` line comments are skipped. The scanner raises QueryError on
the first character it cannot use; it holds no state between calls.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.limits import QUERY_INTEGER_MAX_DIGITS, QUERY_TEXT_MAX_CHARS

_ASCII_DIGITS = frozenset("0123456789")

KEYWORDS = frozenset(
    """SELECT FROM WHERE AND OR NOT IN BETWEEN LIKE ESCAPE AS TOP DISTINCT VALUE
    ORDER BY ASC DESC OFFSET LIMIT JOIN GROUP EXISTS ARRAY TRUE FALSE NULL
    UNDEFINED UDF""".split()
)

# Longest operators first so that '>>>' wins over '>>' and '>'.
OPERATORS = (">>>", "<<", ">>", "<=", ">=", "!=", "<>", "||", "??") + tuple("=<>+-*/%()[]{},.:?&|^~")

_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class Token(NamedTuple):
    kind: str  # ident | keyword | number | string | param | op | eof
    value: object
    pos: int
    text: str


def tokenize(text: str) -> list[Token]:
    """All tokens of text, ending with one 'eof' token."""
    if len(text) > QUERY_TEXT_MAX_CHARS:
        raise QueryError.at(text, QUERY_TEXT_MAX_CHARS, f"query text is longer than {QUERY_TEXT_MAX_CHARS} characters")
    tokens: list[Token] = []
    pos = 0
    while True:
        pos = _skip_blank(text, pos)
        if pos >= len(text):
            tokens.append(Token("eof", None, pos, ""))
            return tokens
        token = _scan_one(text, pos)
        tokens.append(token)
        pos += len(token.text)


def _skip_blank(text: str, pos: int) -> int:
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
        elif text.startswith("--", pos):
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end + 1
        else:
            break
    return pos


def _scan_one(text: str, pos: int) -> Token:
    ch = text[pos]
    if ch.isalpha() or ch == "_":
        return _scan_word(text, pos)
    if ch in _ASCII_DIGITS or (ch == "." and pos + 1 < len(text) and text[pos + 1] in _ASCII_DIGITS):
        return _scan_number(text, pos)
    if ch == '"' or ch == "'":
        return _scan_string(text, pos)
    if ch == "@":
        end = _word_end(text, pos + 1)
        if end == pos + 1:
            raise QueryError.at(text, pos, "expected a parameter name after '@'")
        word = text[pos:end]
        return Token("param", word, pos, word)
    for op in OPERATORS:
        if text.startswith(op, pos):
            return Token("op", op, pos, op)
    raise QueryError.at(text, pos, f"unexpected character {ch!r}")


def _word_end(text: str, pos: int) -> int:
    while pos < len(text) and (text[pos].isalnum() or text[pos] in "_$"):
        pos += 1
    return pos


def _scan_word(text: str, pos: int) -> Token:
    end = _word_end(text, pos)
    word = text[pos:end]
    upper = word.upper()
    if upper in KEYWORDS:
        return Token("keyword", upper, pos, word)
    return Token("ident", word, pos, word)


def _scan_number(text: str, pos: int) -> Token:
    if text.startswith(("0x", "0X"), pos):
        end = pos + 2
        while end < len(text) and text[end] in "0123456789abcdefABCDEF":
            end += 1
        if end == pos + 2:
            raise QueryError.at(text, pos, "expected hexadecimal digits after '0x'")
        return Token("number", int(text[pos + 2:end], 16), pos, text[pos:end])
    end = _digits_end(text, pos)
    is_float = False
    if end < len(text) and text[end] == ".":
        end = _digits_end(text, end + 1)
        is_float = True
    if end < len(text) and text[end] in "eE":
        exp = end + 1
        if exp < len(text) and text[exp] in "+-":
            exp += 1
        if exp < len(text) and text[exp] in _ASCII_DIGITS:
            end = _digits_end(text, exp)
            is_float = True
    literal = text[pos:end]
    value = float(literal) if is_float else _integer(text, pos, literal)
    if value in (math.inf, -math.inf):
        raise QueryError.at(text, pos, f"the number {literal[:40]} is beyond the range of a double")
    return Token("number", value, pos, literal)


def _integer(text: str, pos: int, literal: str) -> int:
    if len(literal) > QUERY_INTEGER_MAX_DIGITS:       # past a double's range (and int()'s digit limit)
        raise QueryError.at(text, pos, f"the number {literal[:40]}... ({len(literal)} digits) is "
                                       "beyond the range of a double")
    value = int(literal)
    try:
        float(value)
    except OverflowError:
        raise QueryError.at(text, pos, f"the number {literal[:40]}... is beyond the range of a double") from None
    return value


def _digits_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _ASCII_DIGITS:
        pos += 1
    return pos


def _scan_string(text: str, pos: int) -> Token:
    quote = text[pos]
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return Token("string", _join_surrogates("".join(out)), pos, text[pos:i + 1])
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        i = _scan_escape(text, i, out)
    raise QueryError.at(text, pos, "unterminated string literal; expected a closing " + quote)


def _scan_escape(text: str, i: int, out: list[str]) -> int:
    """Decode the escape at text[i] (a backslash); return the next offset."""
    code = text[i + 1:i + 2]
    if code in _ESCAPES:
        out.append(_ESCAPES[code])
        return i + 2
    if code == "u":
        digits = text[i + 2:i + 6]
        if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
            out.append(chr(int(digits, 16)))
            return i + 6
    raise QueryError.at(text, i, "invalid escape sequence in string literal")


def _join_surrogates(value: str) -> str:
    """Merge \\uD83D\\uDE00-style escaped pairs into one code point."""
    if not any("\ud800" <= ch <= "\udfff" for ch in value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
