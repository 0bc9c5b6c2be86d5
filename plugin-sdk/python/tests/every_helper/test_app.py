"""The every-helper plugin natively: its checks cover every export of ``orca_plugin`` and pass."""

from __future__ import annotations

import pytest

import orca_plugin
from app import NAME, TAG, EveryHelper, check_every_helper
from helper_checks import Check, checks, failures
from orca_plugin import Architecture, Failed, Hook, Market, TagContext
from orca_plugin.testing import FixedCatalogue, instance_type, pod, resources

CATALOGUE = FixedCatalogue(
    [
        instance_type("c7i.large", 2, 4, 0, Architecture.AMD64, 0.0893),
        instance_type("m7i.large", 2, 8, 0, Architecture.AMD64, 0.1008),
        instance_type("m7i.xlarge", 4, 16, 0, Architecture.AMD64, 0.2016),
        instance_type("m7i.2xlarge", 8, 32, 0, Architecture.AMD64, 0.4032),
    ]
)


def test_the_checks_call_every_name_orca_plugin_exports() -> None:
    checked = {c.helper for c in checks()}
    assert sorted(set(orca_plugin.__all__) - checked) == [], "exports no check calls"
    assert sorted(checked - set(orca_plugin.__all__)) == [], "checks of no export"


def test_every_check_passes_natively(capsys: pytest.CaptureFixture[str]) -> None:
    assert failures(checks()) == []
    assert "[debug] every-helper-py: the log helper writes this line" in capsys.readouterr().err


def test_a_check_that_fails_is_named_with_what_it_expected_and_got() -> None:
    def boom() -> None:
        raise TypeError("boom")

    assert failures(
        [
            Check("label", "wrong on purpose", lambda: 4, 3),
            Check("validate_tag", "raises", boom, None),
        ]
    ) == [
        "label (wrong on purpose): expected 3, got 4",
        "validate_tag (raises): expected None, got 'an exception: TypeError: boom'",
    ]


def test_the_plugin_answers_the_cheapest_types_that_fit_its_reason_counting_the_checks() -> None:
    reason = check_every_helper()
    assert reason.startswith("every helper checked natively: ")
    candidates = EveryHelper(CATALOGUE).select_instance(pod(requests=resources(cpu="3")), "{}")
    assert [(c.instance_type, c.reason) for c in candidates] == [("m7i.xlarge", reason), ("m7i.2xlarge", reason)]
    assert EveryHelper(CATALOGUE).info().name == NAME
    assert EveryHelper(CATALOGUE).info().hooks == [Hook.SELECT_INSTANCE, Hook.BUILD_TAGS]


def test_a_failed_check_fails_the_hook_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.checks", lambda: [Check("label", "wrong on purpose", lambda: 4, 3)])
    with pytest.raises(Failed, match=r"1 of 1 helper checks failed: label \(wrong on purpose\)"):
        EveryHelper(CATALOGUE).select_instance(pod(), "{}")


def test_its_tag_is_letters_and_digits_beyond_ascii() -> None:
    context = TagContext(node_name="n", cluster_name="c", instance_type="m7i.large", market=Market.ON_DEMAND)
    assert EveryHelper(CATALOGUE).build_tags(pod(), "{}", context) == [TAG]
    assert any(ord(c) > 0xFFFF for c in TAG.value)
