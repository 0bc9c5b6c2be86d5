"""Every name ``orca_plugin`` exports, called with known inputs, each result compared with what
it must be. ``test_app.py`` runs these checks in CPython; the SDK's end-to-end test builds this
plugin into a component with ``build`` and runs them in orca, in the component's interpreter
(``tests/e2e/languages.rs``), so a helper that cannot be built into a component, or that runs
differently there, fails the SDK's tests (issue 46). Where the component differs by design
(``IN_COMPONENT``, ``HostCatalogue``, ``log``), a check expects what each side must do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from orca_plugin import (
    IN_COMPONENT,
    INTERFACE_VERSION,
    MAX_KEY_LEN,
    MAX_TAGS,
    MAX_VALUE_LEN,
    AllocationStrategy,
    Architecture,
    Candidate,
    Catalogue,
    Declined,
    Failed,
    Hook,
    HostCatalogue,
    InstanceQuery,
    InstanceType,
    InvalidAnnotation,
    InvalidSettings,
    LogLevel,
    Market,
    MarketDecision,
    NoMatch,
    Plugin,
    Pod,
    PolicyError,
    Quantity,
    QuantityError,
    Resources,
    Tag,
    TagContext,
    TagError,
    Toleration,
    Unsupported,
    annotation,
    any_query,
    export,
    get,
    label,
    log,
    node_selector,
    parse_quantity,
    parse_settings,
    tag_problem,
    types,
    validate_tag,
)

ALLOWED = "allowed are letters, digits, spaces and _ . : / = + - @"
SUFFIXES = "expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3"


@dataclass
class Check:
    """One call of an export of ``orca_plugin`` and what it must give."""

    helper: str
    what: str
    run: Callable[[], Any]
    expected: Any


def raised(call: Callable[[], Any]) -> Dict[str, Any]:
    """What ``call`` raised (its class, message and ``kind`` when it has one), or returned."""
    try:
        return {"returned": call()}
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        found: Dict[str, Any] = {"raised": type(error).__name__, "message": str(error)}
        if hasattr(error, "kind"):
            found["kind"] = error.kind
        return found


def _type(name: str, vcpus: int, memory_mib: int, price: Any, zones: Sequence[str] = ()) -> InstanceType:
    return InstanceType(
        name=name,
        family=name.split(".")[0],
        vcpus=vcpus,
        memory_mib=memory_mib,
        gpus=0,
        gpu_model=None,
        architecture=Architecture.AMD64,
        on_demand_price=price,
        spot_price=None,
        zones=list(zones),
    )


def _resources(cpu_millis: int, memory_bytes: int) -> Resources:
    return Resources(cpu_millis=cpu_millis, memory_bytes=memory_bytes, ephemeral_storage_bytes=0, gpus=0)


POD = Pod(
    namespace="vision",
    name="train",
    uid="u-1",
    labels=[("team", "vision")],
    annotations=[("orca.research/instance-type", "m7i.large")],
    requests=_resources(1500, (3 << 30) + 1),
    limits=_resources(0, 0),
    node_selector=[("kubernetes.io/arch", "arm64")],
    tolerations=[Toleration(key="gpu", operator="Exists", value=None, effect="NoSchedule")],
    priority=None,
    json="{}",
    zones=[],
)


class _Inner(Plugin):
    name = "inner"
    version = "1.0.0"

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        raise Declined(f"not {pod.name}")


class _TwoTypes:
    """A catalogue of two fixed types, for ``get`` and the ``Catalogue`` protocol."""

    def query(self, query: InstanceQuery) -> List[InstanceType]:
        types_ = [_type("c7i.large", 2, 4096, 0.0893), _type("m7i.large", 2, 8192, 0.1008)]
        return [t for t in types_ if not query.names or t.name in query.names][: query.limit or None]


def _host_query() -> Any:
    found = HostCatalogue().query(any_query(families=["m7i"], min_vcpus=2, limit=2))
    return [len(found), all(t.family == "m7i" and t.vcpus >= 2 for t in found)]


def _host_get() -> Any:
    t = HostCatalogue().get("m7i.large")
    return t and [t.name, t.family, t.vcpus, t.memory_mib, t.architecture]


def _hook_error(call: Callable[[], Any]) -> Optional[List[Any]]:
    """The exception a hook of the exported class raised, and its WIT value (``Err.value``)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        return [type(error).__name__, getattr(error, "value", None)]
    return None


def checks() -> List[Check]:
    """The checks; inside the component the host's catalogue must know ``m7i.large``."""
    policy = export(_Inner())()
    decision = MarketDecision(
        market=Market.SPOT,
        max_price=None,
        fallback_to_on_demand=True,
        reason="spot first",
        allocation_strategy=AllocationStrategy.PRICE_CAPACITY_OPTIMIZED,
        mark_on_rebalance=False,
    )
    context = TagContext(node_name="n", cluster_name="c", instance_type="m7i.large", market=Market.ON_DEMAND)
    host_expected: List[Check] = (
        [
            Check("HostCatalogue", "a query through the host", _host_query, [2, True]),
            Check("HostCatalogue", "a type by name", _host_get, ["m7i.large", "m7i", 2, 8192, Architecture.AMD64]),
        ]
        if IN_COMPONENT
        else [
            Check("HostCatalogue", "no host natively", lambda: raised(lambda: HostCatalogue().query(any_query()))["raised"], "RuntimeError"),
        ]
    )
    return [
        Check("INTERFACE_VERSION", "the interface", lambda: INTERFACE_VERSION, "0.3.0"),
        Check("IN_COMPONENT", "a bool (the plugin's answer says which)", lambda: isinstance(IN_COMPONENT, bool), True),
        Check("MAX_TAGS", "AWS limit", lambda: MAX_TAGS, 50),
        Check("MAX_KEY_LEN", "AWS limit", lambda: MAX_KEY_LEN, 128),
        Check("MAX_VALUE_LEN", "AWS limit", lambda: MAX_VALUE_LEN, 256),
        # Tags: letters and digits of every script; refusals quoted as Rust's {:?} quotes them.
        Check("tag_problem", "letters and digits beyond ASCII", lambda: tag_problem("Zürich", "ß Ж 中 ٣ Ⅻ ½ 𝐀 𝟘"), None),
        Check("tag_problem", "a zero-width space", lambda: tag_problem("k\u200b", "v"), f"tag \"k\\u{{200b}}\" contains '\\u{{200b}}'; {ALLOWED}"),
        Check("tag_problem", "a no-break space", lambda: tag_problem("k", "a\u00a0b"), f"tag \"k\" contains '\\u{{a0}}'; {ALLOWED}"),
        Check("tag_problem", "the aws: prefix", lambda: tag_problem("AWS:x", "v"), 'tag key "AWS:x" uses the reserved aws: prefix'),
        Check("tag_problem", "a long key, in characters", lambda: tag_problem("é" * 129, "v"), f'tag key "{"é" * 129}" is longer than 128 characters'),
        Check("validate_tag", "accepted", lambda: validate_tag("team", "vision"), None),
        Check("validate_tag", "refused", lambda: raised(lambda: validate_tag("", "v")), {"raised": "TagError", "message": "tag key is empty"}),
        Check("TagError", "is a ValueError", lambda: issubclass(TagError, ValueError), True),
        # Quantities.
        Check("parse_quantity", "1.5Gi in units", lambda: parse_quantity("1.5Gi").to_units_ceil(), 1610612736),
        Check("parse_quantity", "1n rounds up", lambda: parse_quantity("1n").to_millis_ceil(), 1),
        Check("parse_quantity", "Unicode spaces trimmed", lambda: parse_quantity("\u00a02Gi\u3000").to_units_ceil(), 2 << 30),
        Check("Quantity", "exact and normalised", lambda: [str(parse_quantity("1.25")), parse_quantity("1000m") == Quantity(1, 0, 0)], ["125e-2", True]),
        Check("Quantity", "as a float", lambda: Quantity(3, 0, 29).as_float(), 1610612736.0),
        Check("QuantityError", "unknown suffix", lambda: raised(lambda: parse_quantity("4TB")), {"raised": "QuantityError", "kind": "unknown-suffix", "message": f'quantity "4TB" has an unknown suffix; {SUFFIXES}'}),
        Check("QuantityError", "a control character, escaped", lambda: raised(lambda: parse_quantity("\u00012")), {"raised": "QuantityError", "kind": "no-digits", "message": 'quantity "\\u{1}2" has no digits before its suffix'}),
        Check("QuantityError", "too large", lambda: raised(lambda: parse_quantity("1e40").to_millis_ceil()), {"raised": "QuantityError", "kind": "too-large", "message": 'quantity "1e40" is too large'}),
        # Errors and their WIT values.
        Check("PolicyError", "failed is the base case", lambda: PolicyError("x").to_wit(), types.PolicyError_Failed("x")),
        Check("Declined", "its WIT value", lambda: Declined("not mine").to_wit(), types.PolicyError_Declined("not mine")),
        Check("NoMatch", "its kind", lambda: [NoMatch("n").kind, NoMatch("n").to_wit()], ["noMatch", types.PolicyError_NoMatch("n")]),
        Check("InvalidSettings", "its WIT value", lambda: InvalidSettings("bad").to_wit(), types.PolicyError_InvalidSettings("bad")),
        Check("Failed", "its kind", lambda: [Failed("broke").kind, Failed("broke").message], ["failed", "broke"]),
        Check("Unsupported", "its WIT value", lambda: Unsupported().to_wit(), types.PolicyError_Unsupported()),
        Check("InvalidAnnotation", "message and WIT value", lambda: [str(InvalidAnnotation("a", "v", "a number")), InvalidAnnotation("a", "v", "x").to_wit()], ["annotation a='v': expected a number", types.PolicyError_InvalidAnnotation(types.AnnotationError(annotation="a", value="v", expected="x"))]),
        Check("parse_settings", "blank is {}", lambda: parse_settings("  ", "p"), {}),
        Check("parse_settings", "an object", lambda: parse_settings('{"teams": {"a": ["m7i.large"]}}', "p"), {"teams": {"a": ["m7i.large"]}}),
        Check("parse_settings", "not an object", lambda: raised(lambda: parse_settings("[1]", "p")), {"raised": "InvalidSettings", "kind": "invalidSettings", "message": "p settings: expected a JSON object, got [1]"}),
        # Plugins, exported as the component exports them.
        Check("Plugin", "info lists the hooks it overrides", lambda: _Inner().info(), types.PluginInfo(name="inner", version="1.0.0", hooks=[Hook.SELECT_INSTANCE])),
        Check("Hook", "the WIT enum", lambda: [h.name for h in Hook], ["SELECT_INSTANCE", "CHOOSE_MARKET", "BUILD_TAGS"]),
        Check("export", "info through the export", lambda: policy.info(), _Inner().info()),
        Check("export", "a PolicyError becomes the hook's error", lambda: _hook_error(lambda: policy.select_instance(POD, "")), ["Err", types.PolicyError_Declined("not train")]),
        Check("export", "an unimplemented hook", lambda: _hook_error(lambda: policy.build_tags(POD, "", context)), ["Err", types.PolicyError_Unsupported()]),
        # Pods.
        Check("label", "present and absent", lambda: [label(POD, "team"), label(POD, "nope")], ["vision", None]),
        Check("annotation", "present", lambda: annotation(POD, "orca.research/instance-type"), "m7i.large"),
        Check("node_selector", "present", lambda: node_selector(POD, "kubernetes.io/arch"), "arm64"),
        Check("Pod", "a record", lambda: [POD.requests.cpu_millis, POD.tolerations[0].effect], [1500, "NoSchedule"]),
        Check("Resources", "a record", lambda: _resources(1, 2), Resources(cpu_millis=1, memory_bytes=2, ephemeral_storage_bytes=0, gpus=0)),
        Check("Toleration", "a record", lambda: Toleration(key=None, operator="Exists", value=None, effect=None).operator, "Exists"),
        # Catalogue.
        Check("any_query", "matches everything, fields set", lambda: any_query(min_gpus=1, families=("g6",)), InstanceQuery(min_vcpus=0, min_memory_mib=0, min_gpus=1, architecture=None, families=["g6"], exclude_families=[], names=[], limit=0, zones=[])),
        Check("any_query", "an unknown field", lambda: raised(lambda: any_query(gpus=1)), {"raised": "TypeError", "message": "instance-query has no field 'gpus'"}),
        Check("InstanceQuery", "a record", lambda: InstanceQuery(min_vcpus=2, min_memory_mib=0, min_gpus=0, architecture=Architecture.ARM64, families=[], exclude_families=[], names=[], limit=1, zones=[]).architecture, Architecture.ARM64),
        Check("get", "one type by name", lambda: [get(_TwoTypes(), "m7i.large").memory_mib, get(_TwoTypes(), "z9.none")], [8192, None]),
        Check("Catalogue", "a protocol", lambda: [isinstance(_TwoTypes(), Catalogue), isinstance(HostCatalogue(), Catalogue), isinstance(object(), Catalogue)], [True, True, False]),
        Check("InstanceType", "a record", lambda: _type("m7i.large", 2, 8192, None, ["us-east-1a"]).zones, ["us-east-1a"]),
        *host_expected,
        # Answers' records and enums.
        Check("Candidate", "a record", lambda: Candidate(instance_type="m7i.large", reason="r").instance_type, "m7i.large"),
        Check("MarketDecision", "a record", lambda: [decision.market, decision.allocation_strategy], [Market.SPOT, AllocationStrategy.PRICE_CAPACITY_OPTIMIZED]),
        Check("Market", "the WIT enum", lambda: [m.name for m in Market], ["SPOT", "ON_DEMAND"]),
        Check("AllocationStrategy", "the WIT enum", lambda: len(list(AllocationStrategy)), 4),
        Check("Architecture", "the WIT enum", lambda: [a.name for a in Architecture], ["AMD64", "ARM64"]),
        Check("Tag", "a record", lambda: Tag(key="k", value="v"), Tag(key="k", value="v")),
        Check("TagContext", "a record", lambda: context.market, Market.ON_DEMAND),
        Check("types", "the generated bindings", lambda: [types.Candidate is Candidate, types.Pod is Pod], [True, True]),
        Check("LogLevel", "the WIT enum", lambda: [level.name for level in LogLevel], ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]),
        Check("log", "a line to the host (stderr natively)", lambda: log(LogLevel.DEBUG, "every-helper-py: the log helper writes this line"), None),
    ]


def failures(checks_: List[Check]) -> List[str]:
    """The checks whose result is not the expected one, as ``helper (what): expected X, got Y``."""
    failed = []
    for check in checks_:
        try:
            actual = check.run()
        except Exception as error:  # noqa: BLE001 - reported, not raised
            actual = f"an exception: {type(error).__name__}: {error}"
        if actual != check.expected:
            failed.append(f"{check.helper} ({check.what}): expected {check.expected!r}, got {actual!r}")
    return failed
