"""The Rust SDK's tag rules (tags.rs): the same verdicts and the same messages."""

from __future__ import annotations

import pytest

from orca_plugin import MAX_KEY_LEN, MAX_TAGS, MAX_VALUE_LEN, TagError, tag_problem, validate_tag


def test_aws_rules() -> None:
    assert tag_problem("team", "ml-research") is None
    assert tag_problem("orca.research/pod-name", "default/gpu-training") is None
    assert tag_problem("Kostenstelle", "Forschung & Entwicklung") is not None
    assert tag_problem("naïve ключ 名前", "ok") is None
    assert tag_problem("", "x") == "tag key is empty"
    assert tag_problem("aws:cloudformation", "x") == 'tag key "aws:cloudformation" uses the reserved aws: prefix'
    assert "aws:" in (tag_problem("AWS:x", "x") or "")
    assert tag_problem("k" * 129, "x") == f'tag key "{"k" * 129}" is longer than 128 characters'
    assert tag_problem("k", "v" * 257) == 'value of tag "k" is longer than 256 characters'
    assert tag_problem("team", "a;b") == (
        "tag \"team\" contains ';'; allowed are letters, digits, spaces and _ . : / = + - @"
    )
    assert (MAX_TAGS, MAX_KEY_LEN, MAX_VALUE_LEN) == (50, 128, 256)


def test_lengths_count_characters_not_bytes() -> None:
    assert tag_problem("ü" * 128, "é" * 256) is None


def test_messages_quote_like_rusts_debug() -> None:
    assert tag_problem('say "hi"', "x") == (
        "tag \"say \\\"hi\\\"\" contains '\"'; allowed are letters, digits, spaces and _ . : / = + - @"
    )
    assert "contains '\\n'" in (tag_problem("a", "line\nbreak") or "")
    assert "contains '\\''" in (tag_problem("it's", "x") or "")


def test_validate_tag_raises_the_problem() -> None:
    validate_tag("team", "ml")
    with pytest.raises(TagError, match="reserved aws: prefix"):
        validate_tag("aws:x", "y")
