//! Saturating time arithmetic: callers may pass any timestamp and any
//! duration, and the model must never panic on overflow.

use jiff::{SignedDuration, Timestamp};

/// `at + by`, saturating at the ends of jiff's time range.
pub(crate) fn later(at: Timestamp, by: SignedDuration) -> Timestamp {
    at.checked_add(by).unwrap_or(if by.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// `at - by`, saturating at the ends of jiff's time range.
pub(crate) fn earlier(at: Timestamp, by: SignedDuration) -> Timestamp {
    at.checked_sub(by).unwrap_or(if by.is_negative() {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    })
}

/// `seconds` after the Unix epoch: the tests' clock.
#[cfg(test)]
pub(crate) fn t(seconds: i64) -> Timestamp {
    later(Timestamp::UNIX_EPOCH, SignedDuration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_past_the_end_of_time_saturates_instead_of_panicking() {
        assert_eq!(
            later(Timestamp::MAX, SignedDuration::from_secs(1)),
            Timestamp::MAX
        );
        assert_eq!(
            earlier(Timestamp::MIN, SignedDuration::from_secs(1)),
            Timestamp::MIN
        );
        assert_eq!(
            earlier(Timestamp::MAX, SignedDuration::from_secs(-1)),
            Timestamp::MAX
        );
    }
}
