//! The checks EC2 makes on every request that launches instances
//! (RunInstances and CreateFleet alike): the client token, the spot max
//! price and the tags. Shared so that both calls refuse the same garbage
//! with the same words.

use std::collections::BTreeMap;

use crate::error::Ec2Error;

/// EC2 limits on tags and tokens.
const MAX_TOKEN_LENGTH: usize = 64;
const MAX_TAGS: usize = 50;
const MAX_TAG_KEY_LENGTH: usize = 128;
const MAX_TAG_VALUE_LENGTH: usize = 256;

/// The idempotency token, if one was really given: an empty token counts as
/// none, the model does not guess that it meant one.
pub(crate) fn token(client_token: Option<&str>) -> Option<&str> {
    client_token.filter(|token| !token.is_empty())
}

/// # Errors
/// `InvalidParameterValue` for a token that is too long or not ASCII.
pub(crate) fn check_token(token: Option<&str>) -> Result<(), Ec2Error> {
    match token {
        Some(token) if token.len() > MAX_TOKEN_LENGTH || !token.is_ascii() => {
            Err(Ec2Error::invalid_parameter(format!(
                "Value ({token}) for parameter clientToken is invalid. The client token must be a string of up to 64 ASCII characters."
            )))
        }
        _ => Ok(()),
    }
}

/// A max price only matters (and is only checked) for spot.
///
/// # Errors
/// `InvalidParameterValue` for a spot max price that is not a positive
/// number.
pub(crate) fn check_max_price(spot: bool, max_price: Option<f64>) -> Result<(), Ec2Error> {
    match max_price {
        Some(price) if spot && !(price.is_finite() && price > 0.0) => {
            Err(Ec2Error::invalid_parameter(format!(
                "Value ({price}) for parameter MaxPrice is invalid."
            )))
        }
        _ => Ok(()),
    }
}

/// # Errors
/// `TagLimitExceeded` for more than 50 tags; `InvalidParameterValue` for a
/// tag with an empty, too long or `aws:`-reserved key or a too long value.
pub(crate) fn check_tags(tags: &BTreeMap<String, String>) -> Result<(), Ec2Error> {
    if tags.len() > MAX_TAGS {
        return Err(Ec2Error::tag_limit_exceeded());
    }
    for (key, value) in tags {
        if key.is_empty() || key.chars().count() > MAX_TAG_KEY_LENGTH {
            return Err(Ec2Error::invalid_parameter(format!(
                "Tag key '{key}' must be between 1 and 128 characters long."
            )));
        }
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(Ec2Error::invalid_parameter(format!(
                "Tag keys starting with 'aws:' are reserved for internal use: '{key}'."
            )));
        }
        if value.chars().count() > MAX_TAG_VALUE_LENGTH {
            return Err(Ec2Error::invalid_parameter(format!(
                "Tag value for key '{key}' must be at most 256 characters long."
            )));
        }
    }
    Ok(())
}

/// # Errors
/// `InvalidParameterValue` for an empty (or blank) instance type.
pub(crate) fn check_instance_type(instance_type: &str) -> Result<(), Ec2Error> {
    if instance_type.trim().is_empty() {
        return Err(Ec2Error::invalid_parameter(format!(
            "Value ({instance_type}) for parameter instanceType is invalid."
        )));
    }
    Ok(())
}

/// Prices (and other numbers) compare by bits so that a request always
/// equals itself, NaN included.
pub(crate) fn same_number(a: Option<f64>, b: Option<f64>) -> bool {
    a.map(f64::to_bits) == b.map(f64::to_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_price_equals_itself_for_idempotency() {
        assert!(same_number(Some(f64::NAN), Some(f64::NAN)));
        assert!(!same_number(Some(0.1), None));
    }

    #[test]
    fn an_on_demand_max_price_is_not_checked() {
        assert_eq!(check_max_price(false, Some(f64::NAN)), Ok(()));
        assert!(check_max_price(true, Some(-1.0)).is_err());
        assert!(check_max_price(true, Some(f64::INFINITY)).is_err());
    }
}
