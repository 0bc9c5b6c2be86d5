"""Unit tests of the team selector against the SDK's catalogue double (no wasm runtime)."""

from __future__ import annotations

from typing import List, Optional

import pytest

from app import INSTANCE_TYPE_ANNOTATION, TEAM_LABEL, Policy, Settings, TeamSelector, select
from orca_plugin import Architecture, Declined, Hook, InvalidSettings, NoMatch, Pod
from orca_plugin.testing import FixedCatalogue, instance_type, pod, resources

AMD64, ARM64 = Architecture.AMD64, Architecture.ARM64


def catalogue() -> FixedCatalogue:
    return FixedCatalogue(
        [
            instance_type("g6.xlarge", 4, 16, 1, AMD64, 0.805),
            instance_type("g5.xlarge", 4, 16, 1, AMD64, 1.006),
            instance_type("g6.48xlarge", 192, 768, 8, AMD64, 13.35),
            instance_type("p5.48xlarge", 192, 2048, 8, AMD64, 98.32),
            instance_type("c7i.large", 2, 4, 0, AMD64, 0.0893),
            instance_type("c7g.large", 2, 4, 0, ARM64, 0.0725),
            instance_type("m7g.xlarge", 4, 16, 0, ARM64, 0.1632),
        ]
    )


def settings() -> Settings:
    return Settings.parse(
        """{"teams": {
            "vision": ["g5.xlarge", "g6.xlarge", "z9.nothing"],
            "ml": ["g6.48xlarge", "g6.xlarge", "g5.xlarge"],
            "batch": ["c7g.large", "m7g.xlarge"]
        }}"""
    )


def team_pod(team: Optional[str], annotations: Optional[dict] = None, **requests: object) -> Pod:
    return pod(
        labels={TEAM_LABEL: team} if team else None,
        annotations=annotations,
        requests=resources(**requests),  # type: ignore[arg-type]
    )


def names(pod: Pod) -> List[str]:
    return [c.instance_type for c in select(pod, settings(), catalogue())]


def test_a_teams_pod_gets_its_types_in_the_teams_order_and_unknown_types_are_dropped() -> None:
    assert names(team_pod("vision")) == ["g5.xlarge", "g6.xlarge"]


def test_ml_gpu_types_keep_the_teams_order_not_the_price_order() -> None:
    assert names(team_pod("ml", gpus=1)) == ["g6.48xlarge", "g6.xlarge", "g5.xlarge"]
    assert names(team_pod("ml", gpus=4)) == ["g6.48xlarge"]


def test_more_than_8_gpus_is_no_match_listing_the_teams_types() -> None:
    with pytest.raises(NoMatch) as refused:
        select(team_pod("ml", gpus=16), settings(), catalogue())
    assert "g6.48xlarge, g6.xlarge, g5.xlarge" in refused.value.message


def test_batch_gets_its_arm64_types_that_fit_the_requests() -> None:
    assert names(team_pod("batch", cpu="1500m", memory="2Gi")) == ["c7g.large", "m7g.xlarge"]
    assert names(team_pod("batch", cpu="3", memory="8Gi")) == ["m7g.xlarge"]
    # The query asked the host what the pod needs, rounded up.
    fixed = catalogue()
    select(team_pod("batch", cpu="2001m", memory="1Mi"), settings(), fixed)
    assert (fixed.queries[0].min_vcpus, fixed.queries[0].min_memory_mib) == (3, 1)


@pytest.mark.parametrize(
    "the_pod, expected",
    [
        (team_pod(None), "no team label"),
        (team_pod("finance"), 'team "finance"'),
        (team_pod("vision", {INSTANCE_TYPE_ANNOTATION: "m7i.large"}), "names its type"),
    ],
)
def test_pods_it_has_no_opinion_on_are_declined(the_pod: Pod, expected: str) -> None:
    with pytest.raises(Declined) as declined:
        select(the_pod, settings(), catalogue())
    assert expected in declined.value.message


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"team": {}}', "unknown field `team`"),
        ("{}", "missing field `teams`"),
        ("", "missing field `teams`"),
        ("{not json", "team-selector-py settings"),
        ('{"teams": {"ml": "g6.xlarge"}}', "lists of instance types"),
        ("[1]", "expected a JSON object"),
    ],
)
def test_bad_settings_are_invalid_settings(text: str, expected: str) -> None:
    with pytest.raises(InvalidSettings) as invalid:
        Settings.parse(text)
    assert expected in invalid.value.message


def test_info_lists_only_select_instance_and_other_hooks_are_unsupported() -> None:
    from componentize_py_types import Err
    from orca_plugin import types

    info = Policy().info()
    assert (info.name, info.hooks) == ("team-selector-py", [Hook.SELECT_INSTANCE])
    with pytest.raises(Err) as unsupported:
        Policy().choose_market(team_pod("ml"), "{}", [])
    assert unsupported.value.value == types.PolicyError_Unsupported()
    # Hook errors leave the component as the policy-error variant.
    with pytest.raises(Err) as invalid:
        Policy().select_instance(team_pod("ml"), '{"team": {}}')
    assert isinstance(invalid.value.value, types.PolicyError_InvalidSettings)
    assert isinstance(TeamSelector(), TeamSelector)
