//! What becomes of one message, decided from what was read in it and what EC2 said about its
//! instances: pure, so every situation is a row of one table test.
//!
//! The queue belongs to one orca deployment (each cluster has its own queue and rules, as the
//! docs' stack makes them): a message is kept only for a notice this orca may still act on.
//! Everything else is deleted at once, so that no junk circulates ahead of a real warning until
//! the queue's retention drops it: another account's or region's events, bodies orca cannot
//! read, and notices about instances that are not this orca's.

use std::collections::HashSet;

use super::delivery::Delivery;
use super::notice::{self, Notice, NoticeError, NoticeKind, Origin};
use super::owners::Asked;
use crate::metrics::MessageOutcome;

/// One message, read and checked against this orca's account and region.
#[derive(Debug)]
pub(super) enum Reading {
    Unparsed(NoticeError),
    /// From another account or region than this orca's instances live in: not acted on,
    /// whatever instance it names.
    Misdirected {
        origin: Origin,
        wrong: Wrong,
    },
    /// Its notices: for instances a node served here lists (`here`), and the others.
    Notices {
        here: Vec<Notice>,
        unlisted: Vec<Notice>,
    },
}

/// Which part of a notice's origin is not this orca's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wrong {
    Account,
    Region,
}

/// Parses `body` and checks where it comes from against `ours`: its notices, or the reading
/// that says why there are none to act on.
pub(super) fn read(body: &str, ours: &Origin) -> Result<Vec<Notice>, Reading> {
    let parsed = notice::parse(body).map_err(Reading::Unparsed)?;
    let wrong = if parsed.origin.account != ours.account {
        Some(Wrong::Account)
    } else if parsed.origin.region != ours.region {
        Some(Wrong::Region)
    } else {
        None
    };
    match wrong {
        Some(wrong) => Err(Reading::Misdirected {
            origin: parsed.origin,
            wrong,
        }),
        None => Ok(parsed.notices),
    }
}

/// The instances EC2 is asked about for a reading: those of its unlisted notices, except state
/// changes (the next listing shows the state of an instance that is this orca's, so such a
/// notice is never worth keeping, nor an EC2 call).
pub(super) fn to_ask(reading: &Reading) -> Vec<Asked> {
    match reading {
        Reading::Notices { unlisted, .. } => unlisted
            .iter()
            .filter(|notice| worth_keeping(notice))
            .map(|notice| Asked {
                instance_id: notice.instance_id.clone(),
                noticed: notice.time,
            })
            .collect(),
        Reading::Unparsed(_) | Reading::Misdirected { .. } => Vec::new(),
    }
}

fn worth_keeping(notice: &Notice) -> bool {
    notice.kind != NoticeKind::StateChange
}

/// What is done with a message once its notices for instances listed here were delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Nothing in it is left for anyone to act on: deleted.
    Delete(MessageOutcome),
    /// It names instances that may be this orca's and no node served here lists (another
    /// replica's, or not listed yet): handed on or left for whoever acts on them.
    Keep(MessageOutcome),
    /// A notice for an instance listed here could not be acted on yet: left to come back after
    /// the visibility timeout.
    Retry,
}

/// The fate of a message: `kept` holds the ids EC2 says may be this orca's (`None`: the
/// lookup failed, so every one asked may be), `delivery` what became of the notices for
/// instances listed here (`Done` when there were none).
pub(super) fn fate(reading: &Reading, kept: Option<&HashSet<String>>, delivery: Delivery) -> Fate {
    let (here, unlisted) = match reading {
        Reading::Unparsed(_) => return Fate::Delete(MessageOutcome::Unparsed),
        Reading::Misdirected {
            wrong: Wrong::Account,
            ..
        } => return Fate::Delete(MessageOutcome::OtherAccount),
        Reading::Misdirected {
            wrong: Wrong::Region,
            ..
        } => return Fate::Delete(MessageOutcome::OtherRegion),
        Reading::Notices { here, unlisted } => (here, unlisted),
    };
    if !here.is_empty() && delivery == Delivery::Again {
        return Fate::Retry;
    }
    let keep = unlisted.iter().any(|notice| {
        worth_keeping(notice) && kept.is_none_or(|kept| kept.contains(&notice.instance_id))
    });
    match (here.is_empty(), keep) {
        (false, false) => Fate::Delete(MessageOutcome::Delivered),
        (false, true) => Fate::Keep(MessageOutcome::Delivered),
        (true, true) => Fate::Keep(MessageOutcome::Elsewhere),
        (true, false) => Fate::Delete(MessageOutcome::Foreign),
    }
}

#[cfg(test)]
mod tests {
    use super::super::samples;
    use super::*;

    const OURS: &str = "i-0aaaaaaaaaaaaaaa1";
    const UNLISTED: &str = "i-0bbbbbbbbbbbbbbb1";

    fn origin() -> Origin {
        Origin {
            account: "123456789012".to_owned(),
            region: "us-east-2".to_owned(),
        }
    }

    fn notice(kind: NoticeKind, instance_id: &str) -> Notice {
        Notice {
            kind,
            instance_id: instance_id.to_owned(),
            time: jiff::Timestamp::UNIX_EPOCH,
            deadline: None,
            state: None,
            action: None,
            description: String::new(),
        }
    }

    fn notices(here: &[&str], unlisted: &[(NoticeKind, &str)]) -> Reading {
        Reading::Notices {
            here: here
                .iter()
                .map(|id| notice(NoticeKind::SpotInterruption, id))
                .collect(),
            unlisted: unlisted
                .iter()
                .map(|(kind, id)| notice(*kind, id))
                .collect(),
        }
    }

    #[test]
    fn a_message_is_read_only_from_this_orcas_account_and_region() {
        let body = samples::spot(OURS);
        assert_eq!(read(&body, &origin()).unwrap().len(), 1);
        let wrong = |body: &str| match read(body, &origin()) {
            Err(Reading::Misdirected { wrong, origin }) => Some((wrong, origin.to_string())),
            _ => None,
        };
        assert_eq!(
            wrong(&body.replace("123456789012", "210987654321")),
            Some((
                Wrong::Account,
                "account 210987654321, region us-east-2".to_owned()
            ))
        );
        assert_eq!(
            wrong(&body.replace("us-east-2", "eu-west-1")).map(|(wrong, _)| wrong),
            Some(Wrong::Region)
        );
        assert!(matches!(
            read("{\"hello\": 1}", &origin()),
            Err(Reading::Unparsed(_))
        ));
    }

    /// A situation, its reading, what EC2 said of the unlisted instances (`None`: the lookup
    /// failed), how the delivery went, and the message's fate.
    type Case<'a> = (
        &'a str,
        Reading,
        Option<&'a HashSet<String>>,
        Delivery,
        Fate,
    );

    /// Checks each case's fate, naming the situation of one that differs.
    fn assert_fates(cases: Vec<Case<'_>>) {
        for (situation, reading, said, delivery, expected) in cases {
            assert_eq!(fate(&reading, said, delivery), expected, "{situation}");
        }
    }

    /// What EC2 says when the unlisted instance is another replica's of this orca.
    fn kept() -> HashSet<String> {
        HashSet::from([UNLISTED.to_owned()])
    }

    #[test]
    fn a_message_is_kept_only_for_a_notice_this_orca_may_still_act_on() {
        use Delivery::{Again, Done};
        use MessageOutcome::Delivered;
        use NoticeKind::SpotInterruption as Spot;
        let (kept, none) = (kept(), HashSet::new());
        assert_fates(vec![
            (
                "ours, acted on",
                notices(&[OURS], &[]),
                Some(&none),
                Done,
                Fate::Delete(Delivered),
            ),
            (
                "ours, not acted on yet",
                notices(&[OURS], &[]),
                Some(&none),
                Again,
                Fate::Retry,
            ),
            (
                "ours and another replica's",
                notices(&[OURS], &[(Spot, UNLISTED)]),
                Some(&kept),
                Done,
                Fate::Keep(Delivered),
            ),
            (
                "ours and not this orca's",
                notices(&[OURS], &[(Spot, UNLISTED)]),
                Some(&none),
                Done,
                Fate::Delete(Delivered),
            ),
            (
                "ours not acted on yet, and another replica's",
                notices(&[OURS], &[(Spot, UNLISTED)]),
                Some(&kept),
                Again,
                Fate::Retry,
            ),
        ]);
    }

    #[test]
    fn a_notice_for_no_node_here_is_kept_while_it_may_be_another_replicas() {
        use Delivery::Done;
        use MessageOutcome::{Elsewhere, Foreign};
        use NoticeKind::SpotInterruption as Spot;
        let (kept, none) = (kept(), HashSet::new());
        assert_fates(vec![
            (
                "another replica's, or not listed yet",
                notices(&[], &[(Spot, UNLISTED)]),
                Some(&kept),
                Done,
                Fate::Keep(Elsewhere),
            ),
            (
                "not this orca's",
                notices(&[], &[(Spot, UNLISTED)]),
                Some(&none),
                Done,
                Fate::Delete(Foreign),
            ),
            (
                "EC2 could not say: kept, as it may be ours",
                notices(&[], &[(Spot, UNLISTED)]),
                None,
                Done,
                Fate::Keep(Elsewhere),
            ),
        ]);
    }

    #[test]
    fn a_state_change_no_node_here_lists_is_never_kept() {
        use Delivery::Done;
        use MessageOutcome::Foreign;
        use NoticeKind::StateChange;
        let kept = kept();
        assert_fates(vec![
            (
                "a state change no node here lists: the next listing shows it",
                notices(&[], &[(StateChange, UNLISTED)]),
                None,
                Done,
                Fate::Delete(Foreign),
            ),
            (
                "a state change of another replica's instance",
                notices(&[], &[(StateChange, UNLISTED)]),
                Some(&kept),
                Done,
                Fate::Delete(Foreign),
            ),
        ]);
    }

    #[test]
    fn an_unreadable_or_misdirected_message_is_deleted() {
        use Delivery::Done;
        use MessageOutcome::{OtherAccount, OtherRegion, Unparsed};
        let unparsed = || Reading::Unparsed(notice::parse("nonsense").unwrap_err());
        let misdirected = |wrong| Reading::Misdirected {
            origin: origin(),
            wrong,
        };
        assert_fates(vec![
            ("unreadable", unparsed(), None, Done, Fate::Delete(Unparsed)),
            (
                "another account's",
                misdirected(Wrong::Account),
                None,
                Done,
                Fate::Delete(OtherAccount),
            ),
            (
                "another region's",
                misdirected(Wrong::Region),
                None,
                Done,
                Fate::Delete(OtherRegion),
            ),
        ]);
    }

    #[test]
    fn ec2_is_asked_about_unlisted_instances_but_not_for_state_changes() {
        let reading = notices(
            &[OURS],
            &[
                (NoticeKind::StateChange, "i-1"),
                (NoticeKind::ScheduledChange, "i-2"),
            ],
        );
        let asked: Vec<String> = to_ask(&reading)
            .into_iter()
            .map(|asked| asked.instance_id)
            .collect();
        assert_eq!(asked, ["i-2"]);
        assert!(
            to_ask(&Reading::Misdirected {
                origin: origin(),
                wrong: Wrong::Account
            })
            .is_empty()
        );
    }
}
