"""The team-gpu-selector cases of docs/src/plugins/rust.md, natively against the catalogue double."""

from __future__ import annotations

from typing import List, Optional

import pytest

from app import select
from orca_plugin import Architecture, Declined, NoMatch, Pod
from orca_plugin.testing import FixedCatalogue, instance_type, pod, resources

AMD64, ARM64 = Architecture.AMD64, Architecture.ARM64


def catalogue() -> FixedCatalogue:
    return FixedCatalogue(
        [
            instance_type("g5.xlarge", 4, 16, 1, AMD64, 1.006),
            instance_type("g6.xlarge", 4, 16, 1, AMD64, 0.805),
            instance_type("g6e.xlarge", 4, 32, 1, AMD64, 1.861),
            instance_type("g5.48xlarge", 192, 768, 8, AMD64, 16.288),
            instance_type("g6.48xlarge", 192, 768, 8, AMD64, 13.35),
            instance_type("p5.48xlarge", 192, 2048, 8, AMD64, 98.32),
            instance_type("c7i.large", 2, 4, 0, AMD64, 0.0893),
            instance_type("c7g.large", 2, 4, 0, ARM64, 0.0725),
            instance_type("c7g.xlarge", 4, 8, 0, ARM64, 0.145),
            instance_type("m7g.large", 2, 8, 0, ARM64, 0.0816),
        ]
    )


def team_pod(team: Optional[str], **requests: object) -> Pod:
    return pod(labels={"team": team} if team else None, requests=resources(**requests))  # type: ignore[arg-type]


def names(p: Pod) -> List[str]:
    return [c.instance_type for c in select(p, catalogue())]


def test_ml_gets_g6_then_g5_then_g6e_whatever_the_prices_never_p5() -> None:
    assert names(team_pod("ml")) == ["g6.xlarge", "g6.48xlarge", "g5.xlarge", "g5.48xlarge", "g6e.xlarge"]
    assert names(team_pod("ml", gpus=8)) == ["g6.48xlarge", "g5.48xlarge"]


def test_more_than_8_gpus_is_refused_with_no_match() -> None:
    with pytest.raises(NoMatch, match="at most 8 GPUs; the pod asks for 16"):
        select(team_pod("ml", gpus=16), catalogue())


def test_batch_gets_the_cheapest_arm64_types_that_fit() -> None:
    assert names(team_pod("batch")) == ["c7g.large", "m7g.large", "c7g.xlarge"]
    assert names(team_pod("batch", cpu="3", memory="6Gi")) == ["c7g.xlarge"]
    with pytest.raises(NoMatch, match="team batch: cheapest arm64: no type"):
        select(team_pod("batch", cpu="64"), catalogue())


@pytest.mark.parametrize("team, shown", [(None, "None"), ("finance", "'finance'")])
def test_other_teams_are_declined(team: Optional[str], shown: str) -> None:
    with pytest.raises(Declined, match=f"team {shown} is not ml or batch"):
        select(team_pod(team), catalogue())
