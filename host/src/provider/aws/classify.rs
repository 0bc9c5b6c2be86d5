//! Which EC2 errors mean what: no capacity for this offering (try the next), retry later, or
//! give up. The lists follow EC2's error code reference and Karpenter's handling.

use super::api::{ApiError, ApiErrorKind};
use crate::provider::{ErrorClass, ProviderError};

/// This offering has no room now; another type or market may.
const CAPACITY: [&str; 9] = [
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    // The type is not offered in the subnet's zone.
    "Unsupported",
];

/// Worth retrying: EC2 is busy or briefly inconsistent.
const TRANSIENT: [&str; 8] = [
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    // A just-created instance profile takes a while to be usable.
    "InvalidParameterValue.IamInstanceProfileNotReady",
];

/// The class of a failed call.
pub fn class_of(error: &ApiError) -> ErrorClass {
    if error.kind == ApiErrorKind::Transport
        || TRANSIENT.contains(&error.code.as_str())
        || error.status.is_some_and(|status| status >= 500)
    {
        ErrorClass::Transient
    } else if CAPACITY.contains(&error.code.as_str()) {
        ErrorClass::Capacity
    } else {
        // UnauthorizedOperation, InvalidParameterValue, InvalidAMIID.*, Blocked, …:
        // the same call would fail the same way.
        ErrorClass::Permanent
    }
}

pub fn provider_error(error: ApiError) -> ProviderError {
    ProviderError {
        class: class_of(&error),
        code: error.code,
        message: error.message,
    }
}

/// EC2 does not know the instance: not visible yet (its ids propagate eventually), or gone.
pub fn is_not_found(error: &ApiError) -> bool {
    error.code.starts_with("InvalidInstanceID.NotFound")
        || error.code == "InvalidInstanceID.Malformed"
}

/// Codes with which EC2 refuses a whole `TerminateInstances` call because of one of its ids:
/// asked alone, the other ids go through.
const REFUSALS_OF_ONE_INSTANCE: [&str; 3] = [
    // Termination protection (`disableApiTermination`).
    "OperationNotPermitted",
    // A state the instance cannot be terminated from right now.
    "IncorrectInstanceState",
    "UnsupportedOperation",
];

/// Whether a refused `TerminateInstances` may be the fault of one id rather than the call.
pub fn is_refusal_of_one_instance(error: &ApiError) -> bool {
    is_not_found(error) || REFUSALS_OF_ONE_INSTANCE.contains(&error.code.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_gets_the_class_its_handling_needs() {
        for (code, class) in [
            ("InsufficientInstanceCapacity", ErrorClass::Capacity),
            ("SpotMaxPriceTooLow", ErrorClass::Capacity),
            ("VcpuLimitExceeded", ErrorClass::Capacity),
            ("RequestLimitExceeded", ErrorClass::Transient),
            ("UnauthorizedOperation", ErrorClass::Permanent),
            ("InvalidParameterValue", ErrorClass::Permanent),
            ("InvalidAMIID.NotFound", ErrorClass::Permanent),
        ] {
            assert_eq!(class_of(&ApiError::service(code, "x")), class, "{code}");
        }
        let server = ApiError {
            status: Some(503),
            ..ApiError::service("SomethingNew", "x")
        };
        assert_eq!(class_of(&server), ErrorClass::Transient);
        assert_eq!(
            class_of(&ApiError::transport("connection refused")),
            ErrorClass::Transient
        );
    }
}
