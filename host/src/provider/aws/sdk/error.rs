//! An EC2 SDK error as orca's [`ApiError`]: the code and message EC2 answered, or a transport
//! failure; shared by every file that calls the SDK.

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::provider::aws::api::{ApiError, ApiErrorKind};

/// The error EC2 answered (its code, message and HTTP status), or the transport's.
pub(in crate::provider::aws) fn api_error<E, R>(error: SdkError<E, R>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + HasStatus,
{
    match &error {
        SdkError::ServiceError(service) => ApiError {
            kind: ApiErrorKind::Service,
            code: service.err().code().unwrap_or("Unknown").to_owned(),
            message: service
                .err()
                .message()
                .map_or_else(|| format!("{}", DisplayErrorContext(&error)), str::to_owned),
            status: Some(service.raw().status_code()),
        },
        _ => ApiError::transport(format!("{}", DisplayErrorContext(&error))),
    }
}

/// The HTTP status of a raw response, whatever its type.
pub(in crate::provider::aws) trait HasStatus {
    fn status_code(&self) -> u16;
}

impl HasStatus for aws_sdk_ec2::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}
