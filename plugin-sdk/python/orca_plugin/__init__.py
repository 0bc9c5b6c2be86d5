"""The Python SDK for orca policy plugins (``orca:policy@0.3.0``).

A plugin is a class with the hooks it implements, exported from its ``app.py``::

    from orca_plugin import Candidate, HostCatalogue, Plugin, export, label, NoMatch

    class MySelector(Plugin):
        name = "my-selector"
        version = "0.1.0"

        def select_instance(self, pod, settings):
            ...

    Policy = export(MySelector())

``plugin-sdk/python/build DIR OUT.wasm`` makes the WebAssembly component. Everything here but
the host calls (``HostCatalogue``, ``log``) also runs in plain CPython, so plugin logic is
unit-tested with pytest against :class:`orca_plugin.testing.FixedCatalogue`.
"""

from ._wit import IN_COMPONENT, InstanceQuery, LogLevel, types
from .catalogue import Catalogue, HostCatalogue, any_query, get
from .errors import (
    Declined,
    Failed,
    InvalidAnnotation,
    InvalidSettings,
    NoMatch,
    PolicyError,
    Unsupported,
    parse_settings,
)
from .plugin import INTERFACE_VERSION, Plugin, export, log
from .pod import annotation, label, node_selector
from .quantity import Quantity, QuantityError, parse_quantity
from .tags import MAX_KEY_LEN, MAX_TAGS, MAX_VALUE_LEN, TagError, tag_problem, validate_tag

AllocationStrategy = types.AllocationStrategy
Architecture = types.Architecture
Candidate = types.Candidate
Hook = types.Hook
InstanceType = types.InstanceType
Market = types.Market
MarketDecision = types.MarketDecision
Pod = types.Pod
Resources = types.Resources
Tag = types.Tag
TagContext = types.TagContext
Toleration = types.Toleration

__all__ = [
    "AllocationStrategy",
    "Architecture",
    "Candidate",
    "Catalogue",
    "Declined",
    "Failed",
    "Hook",
    "HostCatalogue",
    "INTERFACE_VERSION",
    "IN_COMPONENT",
    "InstanceQuery",
    "InstanceType",
    "InvalidAnnotation",
    "InvalidSettings",
    "LogLevel",
    "MAX_KEY_LEN",
    "MAX_TAGS",
    "MAX_VALUE_LEN",
    "Market",
    "MarketDecision",
    "NoMatch",
    "Plugin",
    "Pod",
    "PolicyError",
    "Quantity",
    "QuantityError",
    "Resources",
    "Tag",
    "TagContext",
    "TagError",
    "Toleration",
    "Unsupported",
    "annotation",
    "any_query",
    "export",
    "get",
    "label",
    "log",
    "node_selector",
    "parse_quantity",
    "parse_settings",
    "tag_problem",
    "types",
    "validate_tag",
]
