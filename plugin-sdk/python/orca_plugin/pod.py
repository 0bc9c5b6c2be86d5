"""Lookups on a :class:`Pod`'s string maps, which the bindings give as lists of
``(key, value)`` tuples in key order (the Rust SDK's ``PodExt``)."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ._wit import types

Pod = types.Pod


def lookup(pairs: Sequence[Tuple[str, str]], key: str) -> Optional[str]:
    """The value of ``key`` in a list of ``(key, value)`` pairs, or ``None``."""
    for k, v in pairs:
        if k == key:
            return v
    return None


def label(pod: "types.Pod", key: str) -> Optional[str]:
    """The pod's label ``key``, or ``None``."""
    return lookup(pod.labels, key)


def annotation(pod: "types.Pod", key: str) -> Optional[str]:
    """The pod's annotation ``key``, or ``None``."""
    return lookup(pod.annotations, key)


def node_selector(pod: "types.Pod", key: str) -> Optional[str]:
    """The pod's node selector ``key`` (``kubernetes.io/arch``, say), or ``None``."""
    return lookup(pod.node_selector, key)


__all__ = ["annotation", "label", "lookup", "node_selector"]
