//! The RunInstances request, and the checks EC2 makes on it before anything
//! else.

use std::collections::BTreeMap;

use crate::error::Ec2Error;

/// A request to launch one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInstances {
    /// The idempotency token (up to 64 ASCII characters). An empty token
    /// counts as none: the model does not guess that it meant one.
    pub client_token: Option<String>,
    pub instance_type: String,
    /// A one-time spot instance rather than on-demand.
    pub spot: bool,
    /// The spot max price (USD per hour); ignored for on-demand launches,
    /// but still compared for idempotency.
    pub max_price: Option<f64>,
    pub subnet_id: Option<String>,
    /// Tags applied at launch (TagSpecifications).
    pub tags: BTreeMap<String, String>,
    /// An opaque digest of every other launch parameter (AMI, security
    /// groups, user data, …), derived by the adapter, so that the model can
    /// compare all parameters as EC2's idempotency does.
    pub fingerprint: String,
}

/// EC2 limits on tags and tokens.
const MAX_TOKEN_LENGTH: usize = 64;
const MAX_TAGS: usize = 50;
const MAX_TAG_KEY_LENGTH: usize = 128;
const MAX_TAG_VALUE_LENGTH: usize = 256;

impl RunInstances {
    /// The idempotency token, if one was really given.
    pub(crate) fn token(&self) -> Option<&str> {
        self.client_token
            .as_deref()
            .filter(|token| !token.is_empty())
    }

    /// True if `other` is the same request as far as EC2's idempotency is
    /// concerned: every parameter but the token.
    pub(crate) fn same_parameters(&self, other: &RunInstances) -> bool {
        self.instance_type == other.instance_type
            && self.spot == other.spot
            && same_price(self.max_price, other.max_price)
            && self.subnet_id == other.subnet_id
            && self.tags == other.tags
            && self.fingerprint == other.fingerprint
    }

    /// The checks EC2 makes before acting.
    ///
    /// # Errors
    /// `InvalidParameterValue` for an empty instance type, a token that is too
    /// long or not ASCII, a spot max price that is not a positive number, or a
    /// tag with an empty, too long or `aws:`-reserved key or a too long value;
    /// `TagLimitExceeded` for more than 50 tags.
    pub(crate) fn validate(&self) -> Result<(), Ec2Error> {
        if self.instance_type.trim().is_empty() {
            return Err(Ec2Error::invalid_parameter(format!(
                "Value ({}) for parameter instanceType is invalid.",
                self.instance_type
            )));
        }
        if let Some(token) = self.token()
            && (token.len() > MAX_TOKEN_LENGTH || !token.is_ascii())
        {
            return Err(Ec2Error::invalid_parameter(format!(
                "Value ({token}) for parameter clientToken is invalid. The client token must be a string of up to 64 ASCII characters."
            )));
        }
        if self.spot
            && let Some(price) = self.max_price
            && !(price.is_finite() && price > 0.0)
        {
            return Err(Ec2Error::invalid_parameter(format!(
                "Value ({price}) for parameter MaxPrice is invalid."
            )));
        }
        if self.tags.len() > MAX_TAGS {
            return Err(Ec2Error::tag_limit_exceeded());
        }
        for (key, value) in &self.tags {
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
}

/// Prices compare by bits so that a request always equals itself.
fn same_price(a: Option<f64>, b: Option<f64>) -> bool {
    a.map(f64::to_bits) == b.map(f64::to_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RunInstances {
        RunInstances {
            client_token: Some("pod-uid-1".to_owned()),
            instance_type: "m7i.large".to_owned(),
            spot: false,
            max_price: None,
            subnet_id: None,
            tags: BTreeMap::new(),
            fingerprint: "ami-1".to_owned(),
        }
    }

    #[test]
    fn the_token_itself_is_not_a_parameter_compared_for_idempotency() {
        let mut other = request();
        other.client_token = Some("another".to_owned());
        assert!(request().same_parameters(&other));
        other.fingerprint = "ami-2".to_owned();
        assert!(!request().same_parameters(&other));
    }

    #[test]
    fn an_empty_token_counts_as_none() {
        let mut empty = request();
        empty.client_token = Some(String::new());
        assert_eq!(empty.token(), None);
    }

    #[test]
    fn garbage_requests_are_refused_with_ec2_codes() {
        let mut bad = request();
        bad.instance_type = String::new();
        assert_eq!(
            bad.validate().map_err(|e| e.code),
            Err("InvalidParameterValue".to_owned())
        );

        let mut bad = request();
        bad.client_token = Some("x".repeat(65));
        assert!(bad.validate().is_err());

        let mut bad = request();
        bad.spot = true;
        bad.max_price = Some(f64::NAN);
        assert!(bad.validate().is_err());

        let mut bad = request();
        bad.tags
            .insert("aws:cloudformation".to_owned(), "x".to_owned());
        assert!(bad.validate().is_err());

        let mut bad = request();
        bad.tags = (0..51).map(|n| (format!("k{n}"), String::new())).collect();
        assert_eq!(
            bad.validate().map_err(|e| e.code),
            Err("TagLimitExceeded".to_owned())
        );

        assert_eq!(request().validate(), Ok(()));
    }
}
