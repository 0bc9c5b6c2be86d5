"""Plugins as plain classes, and the adapter componentize-py exports.

>>> class AlwaysLarge(Plugin):
...     name = "always-large"
...     version = "0.1.0"
...     def select_instance(self, pod, settings):
...         return [Candidate(instance_type="m7i.large", reason="always")]

The hooks a plugin implements are the methods it overrides (``info`` lists only those); the
others answer ``unsupported``. In the plugin's ``app.py``, ``Policy = export(AlwaysLarge())``
is what componentize-py looks for.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, ClassVar, List, Optional, Sequence, TypeVar

from ._wit import Err, IN_COMPONENT, LogLevel, host_module, types
from .errors import PolicyError, Unsupported

Hook = types.Hook
Pod = types.Pod
Candidate = types.Candidate
MarketDecision = types.MarketDecision
Tag = types.Tag
TagContext = types.TagContext

#: The interface version this SDK builds for; ``build`` stamps it into the component's
#: ``orca:policy-version`` custom section.
INTERFACE_VERSION = "0.3.0"

_HOOK_METHODS = (
    ("select_instance", Hook.SELECT_INSTANCE),
    ("choose_market", Hook.CHOOSE_MARKET),
    ("build_tags", Hook.BUILD_TAGS),
)


class Plugin:
    """A policy plugin. Set ``name`` and ``version`` (1 to 63 printable ASCII characters, no
    spaces) and override the hooks you implement; each returns its answer or raises an
    :class:`orca_plugin.PolicyError` (``Declined``, ``NoMatch``, ...)."""

    name: ClassVar[str]
    version: ClassVar[str] = "0.1.0"
    #: The hooks ``info`` reports; ``None``: the overridden hook methods.
    hooks: ClassVar[Optional[Sequence["types.Hook"]]] = None

    def select_instance(self, pod: "types.Pod", settings: str) -> List["types.Candidate"]:
        """Instance types for the pod, best first (at most 20)."""
        raise Unsupported()

    def choose_market(
        self, pod: "types.Pod", settings: str, candidates: List["types.Candidate"]
    ) -> "types.MarketDecision":
        """Spot or on-demand, given the selector's candidates."""
        raise Unsupported()

    def build_tags(self, pod: "types.Pod", settings: str, context: "types.TagContext") -> List["types.Tag"]:
        """Tags for the pod's instance and volumes (orca checks them against AWS's rules)."""
        raise Unsupported()

    def implemented_hooks(self) -> List["types.Hook"]:
        """``hooks`` if set, else the hooks whose methods this class overrides."""
        if self.hooks is not None:
            return list(self.hooks)
        cls = type(self)
        return [hook for method, hook in _HOOK_METHODS if getattr(cls, method) is not getattr(Plugin, method)]

    def info(self) -> "types.PluginInfo":
        """What ``info`` answers: name, version and implemented hooks."""
        return types.PluginInfo(name=self.name, version=self.version, hooks=self.implemented_hooks())


_T = TypeVar("_T")


def _call(method: Callable[..., _T], *args: Any) -> _T:
    try:
        return method(*args)
    except PolicyError as error:
        raise Err(error.to_wit()) from None
    # Any other exception propagates: componentize-py prints its traceback to the plugin's
    # stderr (which orca logs) and traps, which orca counts as `crashed`, telling the exception
    # and the plugin's line from the traceback's end in the pod's message.


def export(plugin: Plugin) -> type:
    """The class componentize-py exports as ``orca:policy/policy``: assign it to ``Policy`` in
    the app module (``Policy = export(MyPlugin())``). It turns raised
    :class:`orca_plugin.PolicyError` into the hook's error."""

    class Policy:
        def info(self) -> "types.PluginInfo":
            return plugin.info()

        def select_instance(self, pod: "types.Pod", settings: str) -> List["types.Candidate"]:
            return _call(plugin.select_instance, pod, settings)

        def choose_market(
            self, pod: "types.Pod", settings: str, candidates: List["types.Candidate"]
        ) -> "types.MarketDecision":
            return _call(plugin.choose_market, pod, settings, candidates)

        def build_tags(self, pod: "types.Pod", settings: str, context: "types.TagContext") -> List["types.Tag"]:
            return _call(plugin.build_tags, pod, settings, context)

    Policy.__qualname__ = Policy.__name__ = "Policy"
    return Policy


def log(level: "LogLevel", message: str) -> None:
    """A line in orca's log, attributed to the plugin; natively (tests) it goes to stderr."""
    if IN_COMPONENT:
        host_module().log(level, message)
    else:
        print(f"[{level.name.lower()}] {message}", file=sys.stderr)


__all__ = [
    "Candidate",
    "Hook",
    "INTERFACE_VERSION",
    "MarketDecision",
    "Plugin",
    "Pod",
    "Tag",
    "TagContext",
    "export",
    "log",
]
