"""Rust's ``{:?}`` for strings and characters, so messages read exactly as the Rust SDK's."""

from __future__ import annotations

import unicodedata

_ESCAPES = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", "\0": "\\0"}


def _escape(c: str, quote: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    if c == quote:
        return "\\" + c
    category = unicodedata.category(c)
    if category.startswith("C") or category in ("Zl", "Zp") or (category == "Zs" and c != " "):
        return "\\u{%x}" % ord(c)
    return c


def debug_str(text: str) -> str:
    """``"text"`` with Rust's escapes (``format!("{text:?}")``)."""
    return '"' + "".join(_escape(c, '"') for c in text) + '"'


def debug_char(c: str) -> str:
    """``'c'`` with Rust's escapes (``format!("{c:?}")`` of a ``char``)."""
    return "'" + _escape(c, "'") + "'"
