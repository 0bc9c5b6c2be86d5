//! The log group containers write to, made ready at startup: created with the configured
//! retention if it is missing, left as it is if it exists (its retention is its owner's).

use super::{GroupCreation, LogsApi, LogsError};
use crate::config::LogsConfig;

/// What startup found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupReady {
    /// Created now, with the configured retention (`None`: kept forever).
    Created {
        retention_days: Option<u32>,
    },
    Existed,
}

/// Why the group could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("creating log group {group} (provider.aws.logs.group)")]
    Create {
        group: String,
        #[source]
        source: LogsError,
    },
    #[error(
        "setting log group {group}'s retention to {days} days (provider.aws.logs.retentionDays)"
    )]
    Retention {
        group: String,
        days: u32,
        #[source]
        source: LogsError,
    },
}

/// Creates `config.group` if it is missing, then sets its retention. Asking again is harmless.
///
/// # Errors
/// The call that failed, with CloudWatch's code (an `AccessDeniedException` names the
/// permission orca's role lacks).
pub async fn ensure(api: &dyn LogsApi, config: &LogsConfig) -> Result<GroupReady, GroupError> {
    let group = &config.group;
    let creation = api
        .create_log_group(group)
        .await
        .map_err(|source| GroupError::Create {
            group: group.clone(),
            source,
        })?;
    if creation == GroupCreation::Existed {
        return Ok(GroupReady::Existed);
    }
    let days = config.retention_days;
    if days == 0 {
        return Ok(GroupReady::Created {
            retention_days: None,
        });
    }
    api.put_retention_policy(group, days)
        .await
        .map_err(|source| GroupError::Retention {
            group: group.clone(),
            days,
            source,
        })?;
    Ok(GroupReady::Created {
        retention_days: Some(days),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogDelivery;
    use crate::provider::aws::logs::fake::{Call, FakeLogs};

    fn config(days: u32) -> LogsConfig {
        LogsConfig {
            group: "/orca/pods".to_owned(),
            retention_days: days,
            delivery: LogDelivery::NonBlocking,
            buffer_size: "4Mi".to_owned(),
            endpoint_url: None,
        }
    }

    #[tokio::test]
    async fn a_missing_group_is_created_with_its_retention_and_an_existing_one_left_alone() {
        let logs = FakeLogs::default();
        assert_eq!(
            ensure(&logs, &config(14)).await.unwrap(),
            GroupReady::Created {
                retention_days: Some(14)
            }
        );
        assert_eq!(logs.retention("/orca/pods"), Some(14));
        assert_eq!(
            ensure(&logs, &config(30)).await.unwrap(),
            GroupReady::Existed
        );
        assert_eq!(
            logs.retention("/orca/pods"),
            Some(14),
            "the owner's setting stays"
        );
        let forever = FakeLogs::default();
        assert_eq!(
            ensure(&forever, &config(0)).await.unwrap(),
            GroupReady::Created {
                retention_days: None
            }
        );
        assert!(
            !forever
                .calls()
                .iter()
                .any(|call| matches!(call, Call::PutRetentionPolicy { .. }))
        );
    }

    #[tokio::test]
    async fn a_refusal_names_the_call_and_the_field() {
        let logs = FakeLogs::default();
        logs.refuse_next(LogsError::AccessDenied("logs:CreateLogGroup".to_owned()));
        let error = ensure(&logs, &config(14)).await.unwrap_err();
        assert!(matches!(error, GroupError::Create { .. }), "{error:?}");
        assert!(
            error.to_string().contains("provider.aws.logs.group"),
            "{error}"
        );
    }
}
