"""every-helper-py: a plugin that calls every name ``orca_plugin`` exports (``helper_checks.py``),
for the SDK's own tests: ``build test`` runs it with pytest, ``tests/e2e/languages.rs`` builds it
into a component with ``build`` and asks it through ``orca plugin eval``, so a helper that cannot
be built into a component, or runs differently there, fails the SDK's tests, not a user's build.

``select_instance`` runs every check: all passed, it answers the catalogue's cheapest types that
fit (the reason says how many checks passed, and where); any failed, ``Failed`` lists them.
``build_tags`` answers one tag of letters and digits beyond ASCII, which ``validate_tag``
accepts and orca checks again.
"""

from __future__ import annotations

from typing import List

from helper_checks import checks, failures
from orca_plugin import (
    IN_COMPONENT,
    Candidate,
    Catalogue,
    Failed,
    HostCatalogue,
    NoMatch,
    Plugin,
    Pod,
    Tag,
    TagContext,
    any_query,
    export,
    validate_tag,
)

NAME = "every-helper-py"
#: The tag build_tags answers: letters and digits of five scripts, a fraction, a numeral.
TAG = Tag(key="orca-sdk/every-helper", value="Zürich ß Ж 中 ٣ Ⅻ ½ 𝐀 𝟘")


def check_every_helper() -> str:
    """The reason the plugin answers with when every check passed.

    Raises:
        Failed: naming every check that did not.
    """
    list_ = checks()
    failed = failures(list_)
    if failed:
        raise Failed(f"{len(failed)} of {len(list_)} helper checks failed: {'; '.join(failed)}")
    where = "in the component" if IN_COMPONENT else "natively"
    helpers = len({c.helper for c in list_})
    return f"every helper checked {where}: {len(list_)} checks of {helpers} helpers passed"


class EveryHelper(Plugin):
    name = NAME
    version = "0.1.0"

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        reason = check_every_helper()
        found = self.catalogue.query(
            any_query(
                min_vcpus=-(-pod.requests.cpu_millis // 1000),
                min_memory_mib=-(-pod.requests.memory_bytes // (1 << 20)),
                min_gpus=pod.requests.gpus,
                zones=pod.zones,
                limit=3,
            )
        )
        if not found:
            raise NoMatch("no type in the catalogue fits the pod")
        return [Candidate(instance_type=t.name, reason=reason) for t in found]

    def build_tags(self, pod: Pod, settings: str, context: TagContext) -> List[Tag]:
        validate_tag(TAG.key, TAG.value)
        return [TAG]


Policy = export(EveryHelper(HostCatalogue()))
