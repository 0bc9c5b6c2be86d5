//! Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `4Ti`, `1e3`) parsed exactly.
//!
//! The value is kept as an exact decimal-or-binary product rather than a float, so `100m` CPU is
//! exactly 100 millicores and `4Ti` is exactly 4 × 2⁴⁰ bytes. Conversions round *up*, as
//! Kubernetes does when it compares requests with capacity: a pod asking for `1n` CPU needs a
//! whole millicore, never zero.

use std::fmt;
use std::str::FromStr;

/// A parsed Kubernetes quantity: `mantissa × 10^exponent10 × 2^exponent2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exponent10: i32,
    exponent2: u32,
}

/// Why a string is not a Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity is empty")]
    Empty,
    #[error("quantity {0:?} has no digits before its suffix")]
    NoDigits(String),
    #[error(
        "quantity {0:?} has an unknown suffix; expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3"
    )]
    UnknownSuffix(String),
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

impl Quantity {
    /// The value in thousandths of a unit, rounded up (CPU `250m` → 250, `2` → 2000).
    ///
    /// # Errors
    /// [`QuantityError::TooLarge`] when the result does not fit an `i128`.
    pub fn to_millis_ceil(&self) -> Result<i128, QuantityError> {
        self.scaled_ceil(3)
    }

    /// The value in whole units, rounded up (memory `1Ki` → 1024, CPU `1500m` → 2).
    ///
    /// # Errors
    /// [`QuantityError::TooLarge`] when the result does not fit an `i128`.
    pub fn to_units_ceil(&self) -> Result<i128, QuantityError> {
        self.scaled_ceil(0)
    }

    /// The value as a float, for display and for ratios where exactness does not matter.
    pub fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent10) * 2f64.powi(self.exponent2 as i32)
    }

    /// `value × 10^extra10`, rounded toward +∞.
    fn scaled_ceil(&self, extra10: i32) -> Result<i128, QuantityError> {
        let too_large = || QuantityError::TooLarge(self.to_string());
        let binary = 1i128.checked_shl(self.exponent2).ok_or_else(too_large)?;
        let numerator = self.mantissa.checked_mul(binary).ok_or_else(too_large)?;
        let exponent = self.exponent10 + extra10;
        if exponent >= 0 {
            let scale = 10i128.checked_pow(exponent as u32).ok_or_else(too_large)?;
            numerator.checked_mul(scale).ok_or_else(too_large)
        } else {
            // A divisor past i128 means the value is a tiny positive fraction (or zero).
            match 10i128.checked_pow(exponent.unsigned_abs()) {
                Some(divisor) => Ok(div_ceil(numerator, divisor)),
                None => Ok(i128::from(numerator > 0)),
            }
        }
    }
}

fn div_ceil(numerator: i128, divisor: i128) -> i128 {
    let quotient = numerator / divisor;
    if numerator % divisor > 0 {
        quotient + 1
    } else {
        quotient
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(QuantityError::Empty);
        }
        let number_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(number_end);
        let (mut mantissa, mut exponent10) = parse_decimal(number, text)?;
        let (suffix_exponent10, exponent2) = parse_suffix(suffix, text)?;
        exponent10 += suffix_exponent10;
        // Normalise trailing zeros away so equal values compare equal and i128 overflows late.
        while mantissa != 0 && mantissa % 10 == 0 {
            mantissa /= 10;
            exponent10 += 1;
        }
        Ok(Quantity {
            mantissa,
            exponent10,
            exponent2,
        })
    }
}

/// `"-1.25"` → (-125, -2).
fn parse_decimal(number: &str, whole: &str) -> Result<(i128, i32), QuantityError> {
    let (negative, unsigned) = match number.as_bytes().first() {
        Some(b'-') => (true, &number[1..]),
        Some(b'+') => (false, &number[1..]),
        _ => (false, number),
    };
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if integer.is_empty() && fraction.is_empty() || !digits_only(integer) || !digits_only(fraction)
    {
        return Err(QuantityError::NoDigits(whole.to_owned()));
    }
    let mut mantissa: i128 = 0;
    for digit in integer.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or_else(|| QuantityError::TooLarge(whole.to_owned()))?;
    }
    let exponent10 =
        -i32::try_from(fraction.len()).map_err(|_| QuantityError::TooLarge(whole.to_owned()))?;
    Ok((if negative { -mantissa } else { mantissa }, exponent10))
}

/// Suffix → (power of ten, power of two).
fn parse_suffix(suffix: &str, whole: &str) -> Result<(i32, u32), QuantityError> {
    let known = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .and_then(|e| e.parse::<i32>().ok())
                .filter(|e| e.abs() <= 40)
                .ok_or_else(|| QuantityError::UnknownSuffix(whole.to_owned()))?;
            (exponent, 0)
        }
    };
    Ok(known)
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}e{}", self.mantissa, self.exponent10)?;
        if self.exponent2 != 0 {
            write!(f, "*2^{}", self.exponent2)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        text.parse().unwrap()
    }

    #[test]
    fn cpu_quantities_convert_to_millicores() {
        assert_eq!(q("250m").to_millis_ceil(), Ok(250));
        assert_eq!(q("2").to_millis_ceil(), Ok(2000));
        assert_eq!(q("0.5").to_millis_ceil(), Ok(500));
        assert_eq!(q("1e3").to_millis_ceil(), Ok(1_000_000));
    }

    #[test]
    fn fractions_round_up_never_to_zero() {
        assert_eq!(q("1n").to_millis_ceil(), Ok(1));
        assert_eq!(q("1500m").to_units_ceil(), Ok(2));
        assert_eq!(q("0").to_millis_ceil(), Ok(0));
    }

    #[test]
    fn binary_and_decimal_memory_suffixes_are_exact() {
        assert_eq!(q("1Ki").to_units_ceil(), Ok(1024));
        assert_eq!(q("4Ti").to_units_ceil(), Ok(4 << 40));
        assert_eq!(q("1.5Gi").to_units_ceil(), Ok(3 << 29));
        assert_eq!(q("128M").to_units_ceil(), Ok(128_000_000));
    }

    #[test]
    fn equal_values_written_differently_compare_equal() {
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("1k"), q("1000"));
    }

    #[test]
    fn malformed_quantities_are_rejected_with_the_input_named() {
        assert_eq!("".parse::<Quantity>(), Err(QuantityError::Empty));
        assert_eq!(
            "Gi".parse::<Quantity>(),
            Err(QuantityError::NoDigits("Gi".into()))
        );
        assert_eq!(
            "1.2.3".parse::<Quantity>(),
            Err(QuantityError::NoDigits("1.2.3".into()))
        );
        assert_eq!(
            "4TB".parse::<Quantity>(),
            Err(QuantityError::UnknownSuffix("4TB".into()))
        );
        let message = "4TB".parse::<Quantity>().unwrap_err().to_string();
        assert!(
            message.contains("\"4TB\"") && message.contains("Ki"),
            "{message}"
        );
    }

    #[test]
    fn huge_values_are_errors_not_panics() {
        let huge = "9".repeat(60);
        assert!(matches!(
            huge.parse::<Quantity>(),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            q("1e40").to_millis_ceil(),
            Err(QuantityError::TooLarge(_))
        ));
        assert_eq!(q("1e-40").to_millis_ceil(), Ok(1));
    }
}
