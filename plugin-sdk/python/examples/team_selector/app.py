"""An example custom selector, the Python twin of deploy/examples/custom-plugin (Rust): each team
(the pod's ``team`` label) gets the instance types its budget allows, listed in the settings.

.. code-block:: yaml

    selectInstance:
      - plugin: team-selector-py
        settings: {"teams": {"vision": ["g6.xlarge", "g5.xlarge"], "batch": ["c7i.large"]}}
      - plugin: orca-default-selector

It answers only for pods it has an opinion on. A pod with an explicit
``orca.research/instance-type``, without a ``team`` label, or of a team not in the settings is
``declined``: not its pod, so orca asks the next plugin. A team pod that none of the team's
types fits is ``no-match``, which fails the pod (the default ``onError: fail``): the team's
budget is the point, and the default selector must not replace it with a bigger type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from orca_plugin import (
    Candidate,
    Catalogue,
    Declined,
    HostCatalogue,
    InvalidSettings,
    NoMatch,
    Plugin,
    Pod,
    annotation,
    any_query,
    export,
    label,
    parse_settings,
)

NAME = "team-selector-py"
TEAM_LABEL = "team"
INSTANCE_TYPE_ANNOTATION = "orca.research/instance-type"


@dataclass
class Settings:
    """``{"teams": {team: [instance types, best first]}}``; nothing else is accepted."""

    teams: Dict[str, List[str]]

    @staticmethod
    def parse(text: str) -> "Settings":
        """The hook's settings JSON.

        Raises:
            InvalidSettings: naming what is wrong.
        """
        value = parse_settings(text, NAME)
        unknown = sorted(set(value) - {"teams"})
        if unknown:
            raise InvalidSettings(f"{NAME} settings: unknown field `{unknown[0]}`, expected `teams`")
        if "teams" not in value:
            raise InvalidSettings(f"{NAME} settings: missing field `teams`")
        teams = value["teams"]
        if not isinstance(teams, dict) or not all(
            isinstance(types, list) and all(isinstance(t, str) for t in types) for types in teams.values()
        ):
            raise InvalidSettings(f"{NAME} settings: `teams` must map team names to lists of instance types")
        return Settings(teams=teams)


def select(pod: Pod, settings: Settings, catalogue: Catalogue) -> List[Candidate]:
    """The team's types that exist in the catalogue and fit the pod's requests, in the team's
    order of preference.

    Raises:
        Declined: when this plugin has no opinion on the pod.
        NoMatch: when none of the team's types fits it.
    """
    if annotation(pod, INSTANCE_TYPE_ANNOTATION) is not None:
        raise Declined(f"the pod names its type with {INSTANCE_TYPE_ANNOTATION}")
    team = label(pod, TEAM_LABEL)
    if team is None:
        raise Declined(f"the pod has no {TEAM_LABEL} label")
    allowed = settings.teams.get(team)
    if allowed is None:
        raise Declined(f'team "{team}" has no instance types')
    fitting = catalogue.query(
        any_query(
            min_vcpus=-(-pod.requests.cpu_millis // 1000),
            min_memory_mib=-(-pod.requests.memory_bytes // (1 << 20)),
            min_gpus=pod.requests.gpus,
            names=allowed,
        )
    )
    fitting_names = {t.name for t in fitting}
    candidates = [
        Candidate(instance_type=name, reason=f"team {team}'s types") for name in allowed if name in fitting_names
    ]
    if not candidates:
        raise NoMatch(f"none of team {team}'s types ({', '.join(allowed)}) fits the pod's requests")
    return candidates


class TeamSelector(Plugin):
    """The ``select-instance`` hook; ``choose-market`` and ``build-tags`` answer unsupported."""

    name = NAME
    version = "0.1.0"

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        return select(pod, Settings.parse(settings), HostCatalogue())


#: What componentize-py exports as orca:policy/policy.
Policy = export(TeamSelector())
