"""The instance-type catalogue as plugins see it: a query answered by the host.

Write plugin logic against :class:`Catalogue` and pass :class:`HostCatalogue` from the hook;
unit tests pass :class:`orca_plugin.testing.FixedCatalogue`, which answers like the host.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from ._wit import InstanceQuery, host_module, types

InstanceType = types.InstanceType


def any_query(**fields: Any) -> "InstanceQuery":
    """A query matching every type, with ``fields`` set (``any_query(min_gpus=1, limit=5)``).

    Raises:
        TypeError: for a field ``instance-query`` does not have.
    """
    query = InstanceQuery(
        min_vcpus=0,
        min_memory_mib=0,
        min_gpus=0,
        architecture=None,
        families=[],
        exclude_families=[],
        names=[],
        limit=0,
        zones=[],
    )
    for name, value in fields.items():
        if not hasattr(query, name):
            raise TypeError(f"instance-query has no field {name!r}")
        setattr(query, name, list(value) if isinstance(value, (tuple, set, frozenset)) else value)
    return query


@runtime_checkable
class Catalogue(Protocol):
    """Answers instance-type queries."""

    def query(self, query: "InstanceQuery") -> List["types.InstanceType"]:
        """Matching types, cheapest on-demand first (unknown prices last, then by name)."""
        ...


def get(catalogue: Catalogue, name: str) -> Optional["types.InstanceType"]:
    """One type by exact name (the Rust ``Catalogue::get``), or ``None``."""
    found = catalogue.query(any_query(names=[name], limit=1))
    return found[0] if found else None


class HostCatalogue:
    """The catalogue of the orca host the plugin runs in (calls ``query-instance-types``).

    Only usable inside the component; natively its queries raise ``RuntimeError``.
    """

    def query(self, query: "InstanceQuery") -> List["types.InstanceType"]:
        """The host's answer to ``query``."""
        return list(host_module().query_instance_types(query))

    def get(self, name: str) -> Optional["types.InstanceType"]:
        """One type by exact name, or ``None``."""
        return get(self, name)


def catalogue_order(t: "types.InstanceType") -> Tuple[Any, ...]:
    """Sort key of the host's order: on-demand price ascending (as Rust's ``f64::total_cmp``),
    unknown prices last, then name."""
    price = t.on_demand_price
    if price is None:
        return (1, 0, 0.0, 0.0, t.name)
    if math.isnan(price):
        return (0, math.copysign(1.0, price), 0.0, 0.0, t.name)
    return (0, 0, price, math.copysign(1.0, price), t.name)


def matches(t: "types.InstanceType", q: "InstanceQuery") -> bool:
    """Whether ``t`` passes every filter of ``q`` (the host's ``matches``; ``limit`` aside)."""
    return (
        t.vcpus >= q.min_vcpus
        and t.memory_mib >= q.min_memory_mib
        and t.gpus >= q.min_gpus
        and (q.architecture is None or q.architecture == t.architecture)
        and (not q.families or t.family in q.families)
        and t.family not in q.exclude_families
        and (not q.names or t.name in q.names)
        # A type whose zones the catalogue does not know is kept, for the launch to find out.
        and (not q.zones or not t.zones or any(z in q.zones for z in t.zones))
    )


_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


def check_query(q: "InstanceQuery") -> None:
    """Raises ``TypeError`` for a query the component could not pass to the host (a float
    ``min_vcpus``, a negative number, a string where a list belongs): inside the component
    those are a crash, so the test double refuses them natively."""
    for name, bound in (
        ("min_vcpus", _U32),
        ("min_memory_mib", _U64),
        ("min_gpus", _U32),
        ("limit", _U32),
    ):
        value = getattr(q, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
            raise TypeError(f"instance-query {name} must be an int in 0..={bound}, not {value!r}")
    if q.architecture is not None and not isinstance(q.architecture, types.Architecture):
        raise TypeError(f"instance-query architecture must be an Architecture or None, not {q.architecture!r}")
    for name in ("families", "exclude_families", "names", "zones"):
        value = getattr(q, name)
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise TypeError(f"instance-query {name} must be a list of str, not {value!r}")


def query_list(types_: Iterable["types.InstanceType"], q: "InstanceQuery") -> List["types.InstanceType"]:
    """``q`` applied to ``types_`` exactly as the host applies it to its catalogue."""
    check_query(q)
    found = [t for t in sorted(types_, key=catalogue_order) if matches(t, q)]
    return found[: q.limit] if q.limit > 0 else found


__all__ = [
    "Catalogue",
    "HostCatalogue",
    "InstanceQuery",
    "InstanceType",
    "any_query",
    "catalogue_order",
    "check_query",
    "get",
    "matches",
    "query_list",
]
