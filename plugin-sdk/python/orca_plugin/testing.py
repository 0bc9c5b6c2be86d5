"""Test doubles for plugin logic run natively: a fixed catalogue that answers queries the way
the host does, and builders for pods and instance types (the Rust SDK's ``testing``)."""

from __future__ import annotations

from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._wit import InstanceQuery, types
from .catalogue import get, query_list
from .quantity import parse_quantity

Architecture = types.Architecture

Pairs = Union[Mapping[str, str], Iterable[Tuple[str, str]]]


class FixedCatalogue:
    """A fixed list of instance types, queried exactly like the host's catalogue: every
    non-empty filter applies (min vcpus / memory / gpus, architecture, families,
    exclude-families, names, zones, where a type with unknown zones is kept), cheapest
    on-demand price first (unknown prices last, then by name), at most ``limit`` (0: all).
    Queries the component could not send (a float ``min_vcpus``, say) raise ``TypeError``."""

    def __init__(self, types_: Iterable["types.InstanceType"]) -> None:
        self.types: List["types.InstanceType"] = list(types_)
        #: Every query asked, for tests that check what the plugin asked for.
        self.queries: List["InstanceQuery"] = []

    def query(self, query: "InstanceQuery") -> List["types.InstanceType"]:
        """The host's answer to ``query`` over :attr:`types`."""
        self.queries.append(query)
        return query_list(self.types, query)

    def get(self, name: str) -> Optional["types.InstanceType"]:
        """One type by exact name, or ``None``."""
        return get(self, name)


def instance_type(
    name: str,
    vcpus: int,
    memory_gib: int,
    gpus: int,
    architecture: "types.Architecture",
    price: Optional[float],
    *,
    spot_price: Optional[float] = None,
    gpu_model: Optional[str] = None,
    zones: Sequence[str] = (),
) -> "types.InstanceType":
    """An instance type whose family is the name's part before the dot."""
    return types.InstanceType(
        name=name,
        family=name.split(".", 1)[0],
        vcpus=vcpus,
        memory_mib=memory_gib * 1024,
        gpus=gpus,
        gpu_model=gpu_model,
        architecture=architecture,
        on_demand_price=price,
        spot_price=spot_price,
        zones=list(zones),
    )


def resources(cpu: str = "0", memory: str = "0", ephemeral_storage: str = "0", gpus: int = 0) -> "types.Resources":
    """``resources`` from Kubernetes quantities (``resources(cpu="500m", memory="1Gi")``)."""
    return types.Resources(
        cpu_millis=parse_quantity(cpu).to_millis_ceil(),
        memory_bytes=parse_quantity(memory).to_units_ceil(),
        ephemeral_storage_bytes=parse_quantity(ephemeral_storage).to_units_ceil(),
        gpus=gpus,
    )


def _pairs(pairs: Optional[Pairs]) -> List[Tuple[str, str]]:
    if pairs is None:
        return []
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return sorted((str(k), str(v)) for k, v in items)


def pod(
    *,
    labels: Optional[Pairs] = None,
    annotations: Optional[Pairs] = None,
    node_selector: Optional[Pairs] = None,
    requests: Optional["types.Resources"] = None,
    limits: Optional["types.Resources"] = None,
    zones: Sequence[str] = (),
    namespace: str = "ns",
    name: str = "p",
) -> "types.Pod":
    """The pod ``ns/p`` (uid ``u``); with no arguments it has no resources, labels or
    annotations, like the Rust ``testing::pod()``. Maps are given as dicts or pairs and stored
    as the bindings store them: ``(key, value)`` tuples in key order."""
    return types.Pod(
        namespace=namespace,
        name=name,
        uid="u",
        labels=_pairs(labels),
        annotations=_pairs(annotations),
        requests=requests if requests is not None else resources(),
        limits=limits if limits is not None else resources(),
        node_selector=_pairs(node_selector),
        tolerations=[],
        priority=None,
        json="{}",
        zones=list(zones),
    )


def pod_with_annotations(annotations: Pairs) -> "types.Pod":
    """``pod()`` with these annotations."""
    return pod(annotations=annotations)


__all__ = [
    "Architecture",
    "FixedCatalogue",
    "instance_type",
    "pod",
    "pod_with_annotations",
    "resources",
]
