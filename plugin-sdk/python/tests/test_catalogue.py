"""FixedCatalogue answers like the host's catalogue (host/src/policy/catalogue/mod.rs)."""

from __future__ import annotations

import math

import pytest

from orca_plugin import Architecture, HostCatalogue, any_query, get
from orca_plugin.testing import FixedCatalogue, instance_type, pod, pod_with_annotations, resources
from orca_plugin import annotation, label, node_selector

AMD64, ARM64 = Architecture.AMD64, Architecture.ARM64


def catalogue() -> FixedCatalogue:
    return FixedCatalogue(
        [
            instance_type("p5.48xlarge", 192, 2048, 8, AMD64, 98.32, zones=["us-west-2a"]),
            instance_type("g6.xlarge", 4, 16, 1, AMD64, 0.805, zones=["us-west-2b", "us-west-2c"]),
            instance_type("g5.xlarge", 4, 16, 1, AMD64, 1.006),
            instance_type("m7g.large", 2, 8, 0, ARM64, 0.0816, zones=["us-west-2a"]),
            instance_type("c7g.large", 2, 4, 0, ARM64, 0.0725, zones=["us-west-2b"]),
            instance_type("x9.unpriced", 2, 4, 0, ARM64, None),
            instance_type("a9.unpriced", 2, 4, 0, ARM64, None),
            instance_type("c7i.large", 2, 4, 0, AMD64, 0.0725),
        ]
    )


def names(**fields: object) -> list:
    return [t.name for t in catalogue().query(any_query(**fields))]


def test_cheapest_first_ties_by_name_unknown_prices_last_by_name() -> None:
    assert names() == [
        "c7g.large", "c7i.large", "m7g.large", "g6.xlarge", "g5.xlarge", "p5.48xlarge",
        "a9.unpriced", "x9.unpriced",
    ]


def test_every_filter_applies() -> None:
    assert names(min_vcpus=4) == ["g6.xlarge", "g5.xlarge", "p5.48xlarge"]
    assert names(min_memory_mib=8 * 1024) == ["m7g.large", "g6.xlarge", "g5.xlarge", "p5.48xlarge"]
    assert names(min_gpus=2) == ["p5.48xlarge"]
    assert names(architecture=ARM64) == ["c7g.large", "m7g.large", "a9.unpriced", "x9.unpriced"]
    assert names(families=["g6", "g5"]) == ["g6.xlarge", "g5.xlarge"]
    assert names(exclude_families=["p5", "a9", "x9", "c7g"]) == ["c7i.large", "m7g.large", "g6.xlarge", "g5.xlarge"]
    assert names(names=["p5.48xlarge", "c7i.large", "nope"]) == ["c7i.large", "p5.48xlarge"]
    assert names(min_gpus=1, limit=2) == ["g6.xlarge", "g5.xlarge"]
    assert names(limit=0) == names()


def test_zones_keep_types_whose_zones_are_unknown() -> None:
    assert names(zones=["us-west-2a"]) == ["c7i.large", "m7g.large", "g5.xlarge", "p5.48xlarge", "a9.unpriced", "x9.unpriced"]
    assert names(zones=["us-west-2c"], min_gpus=1) == ["g6.xlarge", "g5.xlarge"]


def test_get_is_a_query_by_one_name() -> None:
    fixed = catalogue()
    found = get(fixed, "g6.xlarge")
    assert found is not None and found.family == "g6" and found.memory_mib == 16 * 1024
    assert fixed.get("nope") is None
    assert fixed.queries[-1].names == ["nope"] and fixed.queries[-1].limit == 1


def test_queries_the_component_could_not_send_are_refused_natively() -> None:
    with pytest.raises(TypeError, match="min_vcpus"):
        catalogue().query(any_query(min_vcpus=1.5))
    with pytest.raises(TypeError, match="min_gpus"):
        catalogue().query(any_query(min_gpus=-1))
    with pytest.raises(TypeError, match="families"):
        catalogue().query(any_query(families="g6"))
    with pytest.raises(TypeError, match="no field"):
        any_query(min_cpus=1)


def test_nan_prices_sort_like_rusts_total_cmp() -> None:
    fixed = FixedCatalogue([instance_type("n.nan", 1, 1, 0, AMD64, math.nan), instance_type("z.one", 1, 1, 0, AMD64, 1.0),
                            instance_type("u.none", 1, 1, 0, AMD64, None)])
    assert [t.name for t in fixed.query(any_query())] == ["z.one", "n.nan", "u.none"]


def test_the_host_catalogue_is_unreachable_natively() -> None:
    with pytest.raises(RuntimeError, match="FixedCatalogue"):
        HostCatalogue().query(any_query())


def test_pod_lookups_and_builders() -> None:
    p = pod(labels={"team": "ml", "app": "x"}, node_selector={"kubernetes.io/arch": "arm64"},
            requests=resources(cpu="1500m", memory="1Gi", gpus=2))
    assert p.labels == [("app", "x"), ("team", "ml")]
    assert label(p, "team") == "ml" and label(p, "nope") is None
    assert node_selector(p, "kubernetes.io/arch") == "arm64"
    assert (p.requests.cpu_millis, p.requests.memory_bytes, p.requests.gpus) == (1500, 1 << 30, 2)
    a = pod_with_annotations([("orca.research/instance-type", "m7i.large")])
    assert annotation(a, "orca.research/instance-type") == "m7i.large"
    assert (a.namespace, a.name, a.uid, a.json, a.requests.cpu_millis) == ("ns", "p", "u", "{}", 0)
