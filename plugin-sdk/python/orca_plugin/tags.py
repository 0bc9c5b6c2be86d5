"""AWS's tag rules, the same as the Rust SDK's ``tags.rs`` (orca checks every plugin's tags
with those): at most 50 tags, keys of 1 to 128 characters, values of at most 256, no ``aws:``
prefix, letters, digits, spaces and ``_ . : / = + - @`` only."""

from __future__ import annotations

from typing import Optional

from ._debug import debug_char, debug_str

#: At most this many tags on one resource (orca's own ownership tags count).
MAX_TAGS = 50
MAX_KEY_LEN = 128
MAX_VALUE_LEN = 256

_ALLOWED_PUNCTUATION = frozenset(" _.:/=+-@")


class TagError(ValueError):
    """A tag EC2 would refuse; the message names the key and the rule it breaks."""


def _allowed(c: str) -> bool:
    return c.isalnum() or c in _ALLOWED_PUNCTUATION


def tag_problem(key: str, value: str) -> Optional[str]:
    """Why EC2 would refuse the tag ``key=value`` (the Rust SDK's message), or ``None``."""
    if not key:
        return "tag key is empty"
    if len(key) > MAX_KEY_LEN:
        return f"tag key {debug_str(key)} is longer than {MAX_KEY_LEN} characters"
    if len(value) > MAX_VALUE_LEN:
        return f"value of tag {debug_str(key)} is longer than {MAX_VALUE_LEN} characters"
    if key[:4].encode("utf-8", "replace").lower() == b"aws:":
        return f"tag key {debug_str(key)} uses the reserved aws: prefix"
    bad = next((c for c in key + value if not _allowed(c)), None)
    if bad is not None:
        return (
            f"tag {debug_str(key)} contains {debug_char(bad)}; "
            "allowed are letters, digits, spaces and _ . : / = + - @"
        )
    return None


def validate_tag(key: str, value: str) -> None:
    """Raises :class:`TagError` if EC2 would refuse the tag ``key=value``.

    Raises:
        TagError: with the message of :func:`tag_problem`.
    """
    problem = tag_problem(key, value)
    if problem is not None:
        raise TagError(problem)


__all__ = ["MAX_KEY_LEN", "MAX_TAGS", "MAX_VALUE_LEN", "TagError", "tag_problem", "validate_tag"]
