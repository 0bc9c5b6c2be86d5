//! The settings every AWS client orca builds shares: aws-config's default credential chain
//! (environment, profile, IRSA web identity, instance role) and the configured region. One
//! place, so the EC2 and SQS clients never disagree on whose credentials they use.
//!
//! Endpoints, retries and timeouts stay with each client: they differ per service (an SQS long
//! poll lasts 20 s, an EC2 call should not).

use ::aws_config::{BehaviorVersion, Region, SdkConfig};

/// Loads the shared configuration for `region`. Credentials are resolved lazily, on the first
/// call a client makes, so this does not fail without them.
pub async fn load(region: &str) -> SdkConfig {
    ::aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .load()
        .await
}
