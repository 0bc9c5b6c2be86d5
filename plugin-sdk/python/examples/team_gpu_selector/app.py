"""The selector of docs/src/plugins/rust.md ("Saying not my pod"), in Python: team ``ml`` gets GPU
types, ``g6``/``g5`` first, never ``p5``, at most 8 GPUs; team ``batch`` the cheapest arm64
types; any other pod is declined. No settings.

.. code-block:: yaml

    selectInstance:
      - plugin: team-gpu-selector-py
        onError: {default: fail, crashed: fallback, timedOut: fallback}
      - plugin: orca-default-selector
"""

from __future__ import annotations

from typing import List, Sequence

from orca_plugin import (
    Architecture,
    Candidate,
    Catalogue,
    Declined,
    HostCatalogue,
    InstanceType,
    NoMatch,
    Plugin,
    Pod,
    any_query,
    export,
    label,
)

MAX_ML_GPUS = 8
ML_FAMILIES = ["g6", "g5", "g6e"]


def select(pod: Pod, catalogue: Catalogue) -> List[Candidate]:
    """Candidates for the pod, best first.

    Raises:
        Declined: for a pod of neither team.
        NoMatch: for an ``ml`` pod asking more than 8 GPUs, or when nothing fits.
    """
    team = label(pod, "team")
    if team == "ml":
        gpus = max(pod.requests.gpus, 1)
        if gpus > MAX_ML_GPUS:
            raise NoMatch(f"team ml may use at most {MAX_ML_GPUS} GPUs; the pod asks for {gpus}")
        found = catalogue.query(any_query(min_gpus=gpus, families=ML_FAMILIES))
        # The query answers cheapest first; keep g6 before g5 whatever the prices (sort is stable).
        found.sort(key=lambda t: {"g6": 0, "g5": 1}.get(t.family, 2))
        return candidates(found, "team ml: GPU types, g6/g5 first")
    if team == "batch":
        found = catalogue.query(
            any_query(
                min_vcpus=-(-pod.requests.cpu_millis // 1000),
                min_memory_mib=-(-pod.requests.memory_bytes // (1 << 20)),
                architecture=Architecture.ARM64,
                limit=5,
            )
        )
        return candidates(found, "team batch: cheapest arm64")
    raise Declined(f"team {team!r} is not ml or batch")


def candidates(found: Sequence[InstanceType], reason: str) -> List[Candidate]:
    """One candidate per type, in order.

    Raises:
        NoMatch: when ``found`` is empty.
    """
    if not found:
        raise NoMatch(f"{reason}: no type in the catalogue fits the pod")
    return [Candidate(instance_type=t.name, reason=reason) for t in found]


class TeamGpuSelector(Plugin):
    """``select-instance`` only."""

    name = "team-gpu-selector-py"
    version = "0.1.0"

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        return select(pod, HostCatalogue())


Policy = export(TeamGpuSelector())
