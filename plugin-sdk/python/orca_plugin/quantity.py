"""Kubernetes resource quantities (``500m``, ``2``, ``1.5Gi``, ``4Ti``, ``1e3``) parsed exactly.

The same rules as the Rust SDK's ``orca_plugin_sdk::quantity`` (which orca itself uses): the
value is kept as an exact ``mantissa × 10^exponent10 × 2^exponent2``, never a float, and
conversions round *up* as Kubernetes does when it compares requests with capacity (a pod asking
for ``1n`` CPU needs a whole millicore, never zero). Results are bounded like Rust's ``i128``:
past it is :class:`QuantityError` ``too-large``, not a huge integer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ._debug import debug_str

I128_MAX = (1 << 127) - 1
I128_MIN = -(1 << 127)

QuantityErrorKind = Literal["empty", "no-digits", "unknown-suffix", "too-large"]

_SUFFIXES: dict[str, tuple[int, int]] = {
    "": (0, 0),
    "n": (-9, 0),
    "u": (-6, 0),
    "m": (-3, 0),
    "k": (3, 0),
    "M": (6, 0),
    "G": (9, 0),
    "T": (12, 0),
    "P": (15, 0),
    "E": (18, 0),
    "Ki": (0, 10),
    "Mi": (0, 20),
    "Gi": (0, 30),
    "Ti": (0, 40),
    "Pi": (0, 50),
    "Ei": (0, 60),
}
_NUMBER_CHARS = frozenset("0123456789.+-")
_DIGITS = re.compile(r"[0-9]*\Z")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)\Z")


class QuantityError(ValueError):
    """Why a string is not a Kubernetes quantity (or a value does not fit)."""

    def __init__(self, kind: QuantityErrorKind, text: str) -> None:
        self.kind: QuantityErrorKind = kind
        self.text = text
        super().__init__(self._message())

    def _message(self) -> str:
        quoted = debug_str(self.text)
        if self.kind == "empty":
            return "quantity is empty"
        if self.kind == "no-digits":
            return f"quantity {quoted} has no digits before its suffix"
        if self.kind == "unknown-suffix":
            return (
                f"quantity {quoted} has an unknown suffix; expected one of "
                "n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3"
            )
        return f"quantity {quoted} is too large"


def _fits(value: int) -> bool:
    return I128_MIN <= value <= I128_MAX


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: ``mantissa × 10^exponent10 × 2^exponent2``, normalised so equal values
    written differently (``1000m`` and ``1``) compare equal."""

    mantissa: int
    exponent10: int
    exponent2: int

    def to_millis_ceil(self) -> int:
        """The value in thousandths of a unit, rounded up (CPU ``250m`` → 250, ``2`` → 2000).

        Raises:
            QuantityError: ``too-large`` past Rust's ``i128``.
        """
        return self._scaled_ceil(3)

    def to_units_ceil(self) -> int:
        """The value in whole units, rounded up (memory ``1Ki`` → 1024, CPU ``1500m`` → 2).

        Raises:
            QuantityError: ``too-large`` past Rust's ``i128``.
        """
        return self._scaled_ceil(0)

    def as_float(self) -> float:
        """The value as a float, for display and ratios where exactness does not matter."""
        return float(self.mantissa) * 10.0**self.exponent10 * 2.0**self.exponent2

    def _scaled_ceil(self, extra10: int) -> int:
        too_large = QuantityError("too-large", str(self))
        binary = 1 << self.exponent2
        numerator = self.mantissa * binary
        if not (_fits(binary) and _fits(numerator)):
            raise too_large
        exponent = self.exponent10 + extra10
        if exponent >= 0:
            scale: int = pow(10, exponent)
            if not (_fits(scale) and _fits(numerator * scale)):
                raise too_large
            return numerator * scale
        divisor: int = pow(10, -exponent)
        if not _fits(divisor):
            # A tiny positive fraction rounds up to 1; zero and negatives to 0.
            return 1 if numerator > 0 else 0
        return -((-numerator) // divisor)

    def __str__(self) -> str:
        text = f"{self.mantissa}e{self.exponent10}"
        if self.exponent2:
            text += f"*2^{self.exponent2}"
        return text


def parse_quantity(text: str) -> Quantity:
    """Parses a Kubernetes quantity exactly.

    >>> parse_quantity("250m").to_millis_ceil()
    250
    >>> parse_quantity("1.5Gi").to_units_ceil()
    1610612736

    Raises:
        QuantityError: ``empty``, ``no-digits``, ``unknown-suffix`` or ``too-large``, its message
            naming the input as the Rust SDK does.
    """
    text = text.strip()
    if not text:
        raise QuantityError("empty", text)
    number_end = next((i for i, c in enumerate(text) if c not in _NUMBER_CHARS), len(text))
    number, suffix = text[:number_end], text[number_end:]
    mantissa, exponent10 = _parse_decimal(number, text)
    suffix10, exponent2 = _parse_suffix(suffix, text)
    exponent10 += suffix10
    while mantissa != 0 and mantissa % 10 == 0:
        mantissa //= 10
        exponent10 += 1
    return Quantity(mantissa, exponent10, exponent2)


def _parse_decimal(number: str, whole: str) -> tuple[int, int]:
    negative = number.startswith("-")
    unsigned = number[1:] if number[:1] in ("-", "+") else number
    integer, _, fraction = unsigned.partition(".")
    if (not integer and not fraction) or not _DIGITS.match(integer) or not _DIGITS.match(fraction):
        raise QuantityError("no-digits", whole)
    digits = (integer + fraction).lstrip("0")
    # i128 holds at most 39 digits; checking the length first also keeps int() off huge input.
    mantissa = int(digits or "0") if len(digits) <= 39 else I128_MAX + 1
    if mantissa > I128_MAX:
        raise QuantityError("too-large", whole)
    return (-mantissa if negative else mantissa), -len(fraction)


def _parse_suffix(suffix: str, whole: str) -> tuple[int, int]:
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    match = _EXPONENT.match(suffix)
    if match is None or abs(int(match.group(1))) > 40:
        raise QuantityError("unknown-suffix", whole)
    return int(match.group(1)), 0


__all__ = ["Quantity", "QuantityError", "parse_quantity"]
