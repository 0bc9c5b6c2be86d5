"""raises-type-error-py: a plugin whose ``select_instance`` raises ``TypeError``, for the SDK's
own tests: ``tests/e2e/languages.rs`` builds it with ``build`` and checks that the pod's status
and ``orca plugin eval`` say ``TypeError: ...`` and the line below marked ``raises here``, not a
backtrace of the interpreter.
"""

from __future__ import annotations

from typing import List

from orca_plugin import Candidate, Plugin, Pod, export


def instance_type_for(pod: Pod) -> str:
    return "m7i." + len(pod.name)  # raises here: TypeError


class RaisesTypeError(Plugin):
    name = "raises-type-error-py"
    version = "0.1.0"

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        return [Candidate(instance_type=instance_type_for(pod), reason="never reached")]


Policy = export(RaisesTypeError())
