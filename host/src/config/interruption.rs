//! `provider.aws.interruptionQueue`: the SQS queue EventBridge fills with EC2's interruption
//! warnings, rebalance recommendations, scheduled changes and state changes for this cluster.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The SQS queue EventBridge fills with EC2's notices for this cluster's instances.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InterruptionQueueConfig {
    /// The queue's URL, `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`. Each cluster needs its
    /// own queue: a consumer leaves other clusters' messages, which then keep coming back.
    pub url: String,
    /// Another SQS endpoint (LocalStack, a VPC endpoint); absent: the region's own.
    /// `provider.aws.endpointUrl` is EC2's alone.
    #[serde(default)]
    pub endpoint_url: Option<String>,
}

const FIELD: &str = "provider.aws.interruptionQueue";

impl InterruptionQueueConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !is_queue_url(&self.url) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.url"),
                &self.url,
                "an SQS queue URL such as \
                 https://sqs.us-east-1.amazonaws.com/123456789012/orca-interruptions",
            ));
        }
        super::endpoint::check_endpoint_url(
            &format!("{FIELD}.endpointUrl"),
            self.endpoint_url.as_deref(),
        )
    }
}

/// `http(s)://HOST/ACCOUNT/NAME`: a host, a 12-digit account id and a queue name (1 to 80
/// letters, digits, `-` and `_`, a FIFO queue's ending in `.fifo`), as SQS forms queue URLs.
fn is_queue_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let mut parts = rest.split('/');
    let (Some(host), Some(account), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !host.is_empty()
        && !host.contains(|c: char| c.is_whitespace() || c == '?' || c == '#')
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && (1..=80).contains(&name.len())
        && !base.is_empty()
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_are_checked_for_account_and_name() {
        for url in [
            "https://sqs.us-east-1.amazonaws.com/123456789012/orca-interruptions",
            "https://sqs.eu-central-1.amazonaws.com/123456789012/orca_prod.fifo",
            "http://localhost:4566/000000000000/orca",
        ] {
            assert!(is_queue_url(url), "{url}");
        }
        for url in [
            "sqs.us-east-1.amazonaws.com/123456789012/orca",
            "https://sqs.us-east-1.amazonaws.com/orca",
            "https://sqs.us-east-1.amazonaws.com/123456789012/",
            "https://sqs.us-east-1.amazonaws.com/12345/orca",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orca/extra",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orca queue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/.fifo",
            "arn:aws:sqs:us-east-1:123456789012:orca",
            "https:///123456789012/orca",
        ] {
            assert!(!is_queue_url(url), "{url}");
        }
    }
}
