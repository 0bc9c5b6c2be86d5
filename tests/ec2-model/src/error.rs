//! EC2's errors, with EC2's codes and message styles.

/// Whether EC2 answered with an error, or the answer never arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// EC2 answered with an error code.
    Service,
    /// No answer arrived: the client cannot know whether EC2 acted.
    Transport,
}

/// An error as a client of EC2 sees it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Ec2Error {
    /// EC2's error code, e.g. `InvalidInstanceID.NotFound`; `RequestFailed`
    /// for a transport error.
    pub code: String,
    pub message: String,
    pub kind: ErrorKind,
}

/// The error codes the model answers, spelled as EC2 spells them.
pub mod code {
    pub const INSTANCE_NOT_FOUND: &str = "InvalidInstanceID.NotFound";
    pub const INSTANCE_ID_MALFORMED: &str = "InvalidInstanceID.Malformed";
    pub const IDEMPOTENT_PARAMETER_MISMATCH: &str = "IdempotentParameterMismatch";
    pub const IDEMPOTENT_INSTANCE_TERMINATED: &str = "IdempotentInstanceTerminated";
    pub const OPERATION_NOT_PERMITTED: &str = "OperationNotPermitted";
    pub const INCORRECT_INSTANCE_STATE: &str = "IncorrectInstanceState";
    pub const REQUEST_LIMIT_EXCEEDED: &str = "RequestLimitExceeded";
    pub const INSUFFICIENT_INSTANCE_CAPACITY: &str = "InsufficientInstanceCapacity";
    pub const SPOT_MAX_PRICE_TOO_LOW: &str = "SpotMaxPriceTooLow";
    pub const INVALID_PARAMETER_VALUE: &str = "InvalidParameterValue";
    pub const MISSING_PARAMETER: &str = "MissingParameter";
    pub const UNSUPPORTED_OPERATION: &str = "UnsupportedOperation";
    pub const TAG_LIMIT_EXCEEDED: &str = "TagLimitExceeded";
    pub const TEMPLATE_NAME_IN_USE: &str = "InvalidLaunchTemplateName.AlreadyExistsException";
    pub const TEMPLATE_NAME_NOT_FOUND: &str = "InvalidLaunchTemplateName.NotFoundException";
    pub const TEMPLATE_NAME_MALFORMED: &str = "InvalidLaunchTemplateName.MalformedException";
    pub const TEMPLATE_ID_NOT_FOUND: &str = "InvalidLaunchTemplateId.NotFound";
    pub const TEMPLATE_VERSION_NOT_FOUND: &str = "InvalidLaunchTemplateId.VersionNotFound";
    /// Not an EC2 code: the model's name for a lost answer.
    pub const REQUEST_FAILED: &str = "RequestFailed";
}

impl Ec2Error {
    fn service(code: &str, message: impl Into<String>) -> Ec2Error {
        Ec2Error {
            code: code.to_owned(),
            message: message.into(),
            kind: ErrorKind::Service,
        }
    }

    /// True for `RequestLimitExceeded`: nothing happened, retry later.
    pub fn is_throttling(&self) -> bool {
        self.code == code::REQUEST_LIMIT_EXCEEDED
    }

    /// True for a lost answer: EC2 may or may not have acted.
    pub fn is_transport(&self) -> bool {
        self.kind == ErrorKind::Transport
    }

    pub(crate) fn not_found(ids: &[&str]) -> Ec2Error {
        let message = match ids {
            [one] => format!("The instance ID '{one}' does not exist"),
            many => format!("The instance IDs '{}' do not exist", many.join(", ")),
        };
        Ec2Error::service(code::INSTANCE_NOT_FOUND, message)
    }

    pub(crate) fn malformed(id: &str) -> Ec2Error {
        Ec2Error::service(code::INSTANCE_ID_MALFORMED, format!("Invalid id: \"{id}\""))
    }

    pub(crate) fn idempotent_parameter_mismatch() -> Ec2Error {
        Ec2Error::service(
            code::IDEMPOTENT_PARAMETER_MISMATCH,
            "Arguments on this idempotent request are inconsistent with arguments used in previous request(s).",
        )
    }

    pub(crate) fn idempotent_instance_terminated() -> Ec2Error {
        Ec2Error::service(
            code::IDEMPOTENT_INSTANCE_TERMINATED,
            "The client token you provided is associated with a resource that is already deleted. Please use a different client token.",
        )
    }

    pub(crate) fn termination_protected(id: &str) -> Ec2Error {
        Ec2Error::service(
            code::OPERATION_NOT_PERMITTED,
            format!(
                "The instance '{id}' may not be terminated. Modify its 'disableApiTermination' instance attribute and try again."
            ),
        )
    }

    pub(crate) fn incorrect_state(id: &str, verb: &str) -> Ec2Error {
        Ec2Error::service(
            code::INCORRECT_INSTANCE_STATE,
            format!("The instance '{id}' is not in a state from which it can be {verb}."),
        )
    }

    pub(crate) fn request_limit_exceeded() -> Ec2Error {
        Ec2Error::service(code::REQUEST_LIMIT_EXCEEDED, "Request limit exceeded.")
    }

    pub(crate) fn insufficient_capacity(instance_type: &str, zone: &str) -> Ec2Error {
        Ec2Error::service(
            code::INSUFFICIENT_INSTANCE_CAPACITY,
            format!(
                "We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested ({zone}). Our system will be working on provisioning additional capacity. You can currently get {instance_type} capacity by not specifying an Availability Zone in your request or choosing a different Availability Zone."
            ),
        )
    }

    pub(crate) fn spot_price_too_low(max_price: f64, price: f64) -> Ec2Error {
        Ec2Error::service(
            code::SPOT_MAX_PRICE_TOO_LOW,
            format!(
                "Your Spot request price of {max_price} is lower than the minimum required Spot request fulfillment price of {price}."
            ),
        )
    }

    pub(crate) fn invalid_parameter(message: impl Into<String>) -> Ec2Error {
        Ec2Error::service(code::INVALID_PARAMETER_VALUE, message)
    }

    pub(crate) fn missing_parameter(name: &str) -> Ec2Error {
        Ec2Error::service(
            code::MISSING_PARAMETER,
            format!("The request must contain the parameter {name}"),
        )
    }

    pub(crate) fn spot_cannot_be_stopped(id: &str) -> Ec2Error {
        Ec2Error::service(
            code::UNSUPPORTED_OPERATION,
            format!(
                "You can't stop the Spot Instance '{id}' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with a persistent Spot Instance request."
            ),
        )
    }

    pub(crate) fn tag_limit_exceeded() -> Ec2Error {
        Ec2Error::service(
            code::TAG_LIMIT_EXCEEDED,
            "The maximum number of tags for a resource has been reached (50).",
        )
    }

    pub(crate) fn template_name_in_use(name: &str) -> Ec2Error {
        Ec2Error::service(
            code::TEMPLATE_NAME_IN_USE,
            format!("Launch template name already in use: {name}"),
        )
    }

    pub(crate) fn template_name_not_found(name: &str) -> Ec2Error {
        Ec2Error::service(
            code::TEMPLATE_NAME_NOT_FOUND,
            format!("The specified launch template, with template name {name}, does not exist."),
        )
    }

    pub(crate) fn template_name_malformed(name: &str) -> Ec2Error {
        Ec2Error::service(
            code::TEMPLATE_NAME_MALFORMED,
            format!(
                "The launch template name {name:?} is malformed: 3 to 128 letters, digits and ().-/_ characters."
            ),
        )
    }

    pub(crate) fn template_id_not_found(id: &str) -> Ec2Error {
        Ec2Error::service(
            code::TEMPLATE_ID_NOT_FOUND,
            format!("The specified launch template, with template ID {id}, does not exist."),
        )
    }

    pub(crate) fn template_version_not_found(id: &str, version: u64) -> Ec2Error {
        Ec2Error::service(
            code::TEMPLATE_VERSION_NOT_FOUND,
            format!(
                "Could not find the specified version {version} for the launch template with ID {id}."
            ),
        )
    }

    pub(crate) fn lost_answer(operation: &str) -> Ec2Error {
        Ec2Error {
            code: code::REQUEST_FAILED.to_owned(),
            message: format!(
                "connection closed before the {operation} response arrived (the request may have been carried out)"
            ),
            kind: ErrorKind::Transport,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_displays_as_code_colon_message() {
        assert_eq!(
            Ec2Error::request_limit_exceeded().to_string(),
            "RequestLimitExceeded: Request limit exceeded."
        );
    }

    #[test]
    fn not_found_names_one_id_in_the_singular_and_many_in_the_plural() {
        assert_eq!(
            Ec2Error::not_found(&["i-1234567890abcdef0"]).message,
            "The instance ID 'i-1234567890abcdef0' does not exist"
        );
        assert_eq!(
            Ec2Error::not_found(&["i-12345678", "i-87654321"]).message,
            "The instance IDs 'i-12345678, i-87654321' do not exist"
        );
    }

    #[test]
    fn a_lost_answer_is_a_transport_error() {
        let error = Ec2Error::lost_answer("RunInstances");
        assert!(error.is_transport());
        assert_eq!(error.code, "RequestFailed");
    }
}
