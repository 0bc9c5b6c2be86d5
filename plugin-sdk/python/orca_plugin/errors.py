"""``policy-error`` as Python exceptions: a hook raises one, the component returns it as the
hook's error. Unit tests catch them with ``pytest.raises(NoMatch)``.

Any other exception escaping a hook is a bug: inside the component it traps, which orca counts
as ``crashed`` (like a Rust plugin's panic), after the traceback went to the plugin's stderr.
"""

from __future__ import annotations

import json
from typing import Any, Dict

from ._wit import types


class PolicyError(Exception):
    """Why a plugin could not decide; the text reaches the pod's status (cut to 1 KiB)."""

    #: The ``onError`` kind in config.yaml.
    kind: str = "failed"

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def to_wit(self) -> "types.PolicyError":
        """The generated variant case the component returns."""
        return types.PolicyError_Failed(self.message)


class Declined(PolicyError):
    """Not this plugin's pod (the message says why): orca asks the next plugin in the chain."""

    kind = "declined"

    def to_wit(self) -> "types.PolicyError":
        return types.PolicyError_Declined(self.message)


class NoMatch(PolicyError):
    """The pod is this plugin's, and nothing it allows fits (the message says what was asked)."""

    kind = "noMatch"

    def to_wit(self) -> "types.PolicyError":
        return types.PolicyError_NoMatch(self.message)


class InvalidSettings(PolicyError):
    """The plugin's ``settings`` from config.yaml are wrong."""

    kind = "invalidSettings"

    def to_wit(self) -> "types.PolicyError":
        return types.PolicyError_InvalidSettings(self.message)


class Failed(PolicyError):
    """Anything else that kept the plugin from deciding."""

    kind = "failed"


class Unsupported(PolicyError):
    """The plugin does not implement this hook (what an unimplemented hook answers)."""

    kind = "unsupported"

    def to_wit(self) -> "types.PolicyError":
        return types.PolicyError_Unsupported()


class InvalidAnnotation(PolicyError):
    """A pod annotation the plugin cannot use: its name, its value and what would be accepted."""

    kind = "invalidAnnotation"

    def __init__(self, annotation: str, value: str, expected: str) -> None:
        super().__init__(f"annotation {annotation}={value!r}: expected {expected}")
        self.annotation = annotation
        self.value = value
        self.expected = expected

    def to_wit(self) -> "types.PolicyError":
        return types.PolicyError_InvalidAnnotation(
            types.AnnotationError(annotation=self.annotation, value=self.value, expected=self.expected)
        )


def parse_settings(settings: str, plugin: str) -> Dict[str, Any]:
    """The hook's ``settings`` JSON as a dict (blank: ``{}``).

    Raises:
        InvalidSettings: for JSON that does not parse or is not an object, naming ``plugin``.
    """
    if not settings.strip():
        return {}
    try:
        value = json.loads(settings)
    except ValueError as error:
        raise InvalidSettings(f"{plugin} settings: {error}") from None
    if not isinstance(value, dict):
        raise InvalidSettings(f"{plugin} settings: expected a JSON object, got {settings.strip()[:80]}")
    return value


__all__ = [
    "Declined",
    "Failed",
    "InvalidAnnotation",
    "InvalidSettings",
    "NoMatch",
    "PolicyError",
    "Unsupported",
    "parse_settings",
]
