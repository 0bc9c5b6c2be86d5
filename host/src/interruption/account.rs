//! The account this orca's instances live in. Every EventBridge event names the account it
//! comes from; a notice from any other account is not this orca's to act on, whatever instance
//! it names (a rule in another account could otherwise send forged spot warnings).
//!
//! The account is the caller's: STS `GetCallerIdentity` with the credentials the EC2 client
//! uses ([`crate::support::aws_config::load`]), so it is the account orca launches into, assumed roles
//! included. The call needs no IAM permission (AWS: "No permissions are required to perform
//! this operation"); it needs an STS endpoint: the region's own, or `AWS_ENDPOINT_URL_STS` (an
//! interface VPC endpoint, a local test server), which aws-config reads.

use std::time::Duration;

use crate::support::BoxError;
use crate::support::aws_config::{ClientSettings, load_for};

/// Attempts, the first included; the SDK backs off between them.
const MAX_ATTEMPTS: u32 = 5;
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the account could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error(
        "sts:GetCallerIdentity failed: orca reads the account its instances live in to check \
         where interruption notices come from (provider.aws.interruptionQueue). The call needs \
         no IAM permission, only an STS endpoint: the region's (sts.REGION.amazonaws.com), or \
         the one AWS_ENDPOINT_URL_STS names (an interface VPC endpoint)"
    )]
    CallerIdentityFailed(#[source] BoxError),
    #[error("sts:GetCallerIdentity answered {0:?}; expected a 12-digit AWS account id")]
    NotAnAccount(String),
}

/// The account of the credentials orca's AWS clients use, in `region`.
///
/// # Errors
/// [`AccountError`] when STS does not answer after the SDK's retries, or answers no account.
pub async fn caller_account(region: &str) -> Result<String, AccountError> {
    let settings = ClientSettings {
        max_attempts: MAX_ATTEMPTS,
        attempt_timeout: ATTEMPT_TIMEOUT,
        call_timeout: CALL_TIMEOUT,
    };
    let answer = aws_sdk_sts::Client::new(&load_for(region, &settings).await)
        .get_caller_identity()
        .send()
        .await
        .map_err(|error| AccountError::CallerIdentityFailed(error.into()))?;
    let account = answer.account().unwrap_or_default();
    if is_account_id(account) {
        Ok(account.to_owned())
    } else {
        Err(AccountError::NotAnAccount(account.to_owned()))
    }
}

/// Twelve decimal digits, as AWS writes account ids.
fn is_account_id(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_id_is_twelve_digits() {
        assert!(is_account_id("123456789012"));
        for not in [
            "",
            "12345678901",
            "1234567890123",
            "12345678901a",
            "arn:aws:iam::1",
        ] {
            assert!(!is_account_id(not), "{not:?}");
        }
    }
}
