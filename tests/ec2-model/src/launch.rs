//! The RunInstances request, and the checks EC2 makes on it before anything
//! else.

use std::collections::BTreeMap;

use crate::checks;
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

impl RunInstances {
    /// The idempotency token, if one was really given.
    pub(crate) fn token(&self) -> Option<&str> {
        checks::token(self.client_token.as_deref())
    }

    /// True if `other` is the same request as far as EC2's idempotency is
    /// concerned: every parameter but the token.
    pub(crate) fn same_parameters(&self, other: &RunInstances) -> bool {
        self.instance_type == other.instance_type
            && self.spot == other.spot
            && checks::same_number(self.max_price, other.max_price)
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
        checks::check_instance_type(&self.instance_type)?;
        checks::check_token(self.token())?;
        checks::check_max_price(self.spot, self.max_price)?;
        checks::check_tags(&self.tags)
    }
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
