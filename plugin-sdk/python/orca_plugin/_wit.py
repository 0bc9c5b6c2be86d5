"""The one place that imports the bindings componentize-py generates from the WIT.

Inside the component, ``wit_world`` is the module componentize-py generates while it builds:
its ``host`` functions call the orca host. Natively (pytest), ``wit_world`` is the output of
``componentize-py bindings`` (``build`` puts it on ``PYTHONPATH``): the same record, enum and
variant classes, and ``host`` functions that only raise ``NotImplementedError``. So everything
but the host calls runs natively; ``orca_plugin`` calls the host only through
:func:`host_module`, and only when running inside the component.
"""

from __future__ import annotations

import sys
from types import ModuleType

try:
    from componentize_py_types import Err
    from wit_world.imports import host as _host_bindings
    from wit_world.imports import types
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        "orca_plugin needs the generated orca:policy bindings (module wit_world) on the path: "
        "run tests through `plugin-sdk/python/build test DIR`, or generate them with "
        "`plugin-sdk/python/build bindings` and add the directory it prints to PYTHONPATH"
    ) from error

#: True inside the WebAssembly component (componentize-py runs CPython on WASI).
IN_COMPONENT: bool = sys.platform == "wasi"

InstanceQuery = _host_bindings.InstanceQuery
LogLevel = _host_bindings.LogLevel


def host_module() -> ModuleType:
    """The generated ``host`` interface, whose functions call orca (component only).

    Raises:
        RuntimeError: natively, where there is no host to call.
    """
    if not IN_COMPONENT:
        raise RuntimeError(
            "the orca host is only reachable inside the component; in native tests pass a "
            "orca_plugin.testing.FixedCatalogue instead of HostCatalogue"
        )
    return _host_bindings


__all__ = ["Err", "IN_COMPONENT", "InstanceQuery", "LogLevel", "host_module", "types"]
