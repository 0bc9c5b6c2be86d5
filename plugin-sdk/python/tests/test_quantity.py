"""The Rust SDK's quantity tests (quantity.rs), ported, and a few more edges."""

from __future__ import annotations

import pytest

from orca_plugin import Quantity, QuantityError, parse_quantity as q


def test_cpu_quantities_convert_to_millicores() -> None:
    assert q("250m").to_millis_ceil() == 250
    assert q("2").to_millis_ceil() == 2000
    assert q("0.5").to_millis_ceil() == 500
    assert q("1e3").to_millis_ceil() == 1_000_000


def test_fractions_round_up_never_to_zero() -> None:
    assert q("1n").to_millis_ceil() == 1
    assert q("1500m").to_units_ceil() == 2
    assert q("0").to_millis_ceil() == 0
    assert q("-1500m").to_units_ceil() == -1  # ceil, as Rust's div_ceil rounds toward +inf


def test_binary_and_decimal_memory_suffixes_are_exact() -> None:
    assert q("1Ki").to_units_ceil() == 1024
    assert q("4Ti").to_units_ceil() == 4 << 40
    assert q("1.5Gi").to_units_ceil() == 3 << 29
    assert q("128M").to_units_ceil() == 128_000_000
    assert q(" 2Gi ").to_units_ceil() == 2 << 30


def test_equal_values_written_differently_compare_equal() -> None:
    assert q("1000m") == q("1")
    assert q("1k") == q("1000")
    assert q("1E3") == q("1k") and q("1E") == Quantity(1, 18, 0)
    assert str(q("1.5Gi")) == "15e-1*2^30"


@pytest.mark.parametrize(
    "text, kind",
    [("", "empty"), ("  ", "empty"), ("Gi", "no-digits"), ("1.2.3", "no-digits"), (".", "no-digits"),
     ("+", "no-digits"), ("4TB", "unknown-suffix"), ("1e", "unknown-suffix"), ("1e41", "unknown-suffix"),
     ("1e_3", "unknown-suffix"), ("1 Gi", "unknown-suffix")],
)
def test_malformed_quantities_are_rejected_with_the_input_named(text: str, kind: str) -> None:
    with pytest.raises(QuantityError) as error:
        q(text)
    assert error.value.kind == kind


def test_messages_are_the_rust_sdks() -> None:
    with pytest.raises(QuantityError) as error:
        q("4TB")
    assert str(error.value) == (
        'quantity "4TB" has an unknown suffix; expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei '
        "or an exponent like e3"
    )
    with pytest.raises(QuantityError, match=r'^quantity "Gi" has no digits before its suffix$'):
        q("Gi")
    with pytest.raises(QuantityError, match=r"^quantity is empty$"):
        q("")


def test_huge_values_are_errors_like_rusts_i128() -> None:
    with pytest.raises(QuantityError) as error:
        q("9" * 60)
    assert error.value.kind == "too-large"
    with pytest.raises(QuantityError, match="too large"):
        q("1" * 100_000)
    assert q("0" * 5000 + "1").to_units_ceil() == 1
    with pytest.raises(QuantityError, match="too large"):
        q("1e40").to_millis_ceil()
    assert q("1e-40").to_millis_ceil() == 1
    assert q("-1e-40").to_millis_ceil() == 0
    assert q("1e35").to_millis_ceil() == 10**38  # fits i128 (max ~1.7e38)
    with pytest.raises(QuantityError):
        q("2e35").to_millis_ceil()


def test_as_float_is_for_display() -> None:
    assert q("1.5Gi").as_float() == 1.5 * 2**30
