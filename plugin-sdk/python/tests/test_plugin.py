"""Plugins as plain classes: hooks derived from what is overridden, errors mapped to the
policy-error variant, unimplemented hooks unsupported."""

from __future__ import annotations

from typing import List

import pytest
from componentize_py_types import Err

from orca_plugin import (
    INTERFACE_VERSION, Candidate, Declined, Failed, Hook, InvalidAnnotation, InvalidSettings, LogLevel, Market,
    MarketDecision, NoMatch, Plugin, Pod, Tag, TagContext, export, log, parse_settings, types,
)
from orca_plugin.testing import pod


class Selector(Plugin):
    name = "sel"
    version = "1.2.3"

    def select_instance(self, pod: Pod, settings: str) -> List[Candidate]:
        kind = parse_settings(settings, self.name).get("raise")
        errors = {
            "declined": Declined("not mine"),
            "no-match": NoMatch("nothing fits"),
            "failed": Failed("broke"),
            "annotation": InvalidAnnotation("orca.research/x", "y", "a number"),
        }
        if kind in errors:
            raise errors[kind]
        if kind == "bug":
            raise KeyError("bug")
        return [Candidate(instance_type="m7i.large", reason="always")]


class Tagger(Plugin):
    name = "tagger"

    def build_tags(self, pod: Pod, settings: str, context: TagContext) -> List[Tag]:
        return [Tag(key="market", value=context.market.name.lower())]


def test_info_lists_the_overridden_hooks() -> None:
    assert Selector().info() == types.PluginInfo(name="sel", version="1.2.3", hooks=[Hook.SELECT_INSTANCE])
    assert Tagger().info().hooks == [Hook.BUILD_TAGS]
    assert Tagger().info().version == "0.1.0"
    assert INTERFACE_VERSION == "0.3.0"


def test_export_returns_answers_and_raises_errors_as_the_variant() -> None:
    policy = export(Selector())()
    assert policy.select_instance(pod(), "{}") == [Candidate(instance_type="m7i.large", reason="always")]
    cases = {
        "declined": types.PolicyError_Declined("not mine"),
        "no-match": types.PolicyError_NoMatch("nothing fits"),
        "failed": types.PolicyError_Failed("broke"),
        "annotation": types.PolicyError_InvalidAnnotation(types.AnnotationError("orca.research/x", "y", "a number")),
    }
    for kind, expected in cases.items():
        with pytest.raises(Err) as error:
            policy.select_instance(pod(), f'{{"raise": "{kind}"}}')
        assert error.value.value == expected
    with pytest.raises(Err) as error:
        policy.select_instance(pod(), "[]")
    assert isinstance(error.value.value, types.PolicyError_InvalidSettings)
    for hook, args in (("choose_market", (pod(), "{}", [])), ("build_tags", (pod(), "{}", None))):
        with pytest.raises(Err) as error:
            getattr(policy, hook)(*args)
        assert error.value.value == types.PolicyError_Unsupported()


def test_other_exceptions_escape_as_bugs() -> None:
    # Inside the component they trap: orca counts the call `crashed`.
    with pytest.raises(KeyError):
        export(Selector())().select_instance(pod(), '{"raise": "bug"}')


def test_parse_settings() -> None:
    assert parse_settings("", "p") == {} and parse_settings(" {} ", "p") == {}
    with pytest.raises(InvalidSettings, match="^p settings: "):
        parse_settings("{", "p")


def test_log_goes_to_stderr_natively(capsys: pytest.CaptureFixture[str]) -> None:
    log(LogLevel.INFO, "hello")
    assert "[info] hello" in capsys.readouterr().err


def test_market_decision_is_the_generated_record() -> None:
    decision = MarketDecision(market=Market.SPOT, max_price=None, fallback_to_on_demand=True, reason="r",
                              allocation_strategy=None, mark_on_rebalance=False)
    assert decision.market is Market.SPOT
