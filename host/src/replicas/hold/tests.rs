//! The decisions of [`Hold`], on made-up clocks: which write a look calls for, and when this
//! replica may serve.

use jiff::SignedDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

type Instant = BootInstant;

const DURATION: Duration = Duration::from_secs(8);
const RENEW_BEFORE: Duration = Duration::from_secs(5);

fn hold(identity: &str) -> Hold {
    Hold::new(identity.to_owned(), DURATION, RENEW_BEFORE)
}

fn lease(holder: Option<&str>, renewed: Timestamp, version: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("orca-node-a".to_owned()),
            resource_version: Some(version.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(8),
            ..LeaseSpec::default()
        }),
    }
}

fn wall() -> Timestamp {
    "2026-11-25T10:00:00Z".parse().unwrap()
}

fn secs(seconds: i64) -> SignedDuration {
    SignedDuration::from_secs(seconds)
}

/// A boot clock reading, `seconds` after `start`.
fn at(start: Instant, seconds: u64) -> Instant {
    start.saturating_add(Duration::from_secs(seconds))
}

/// One look at `seen` after `elapsed` on the boot clock.
fn look(hold: &mut Hold, seen: Option<&Lease>, start: Instant, elapsed: u64) -> Step {
    let now = at(start, elapsed);
    let current = hold.current(seen);
    if let Some(lease) = &current {
        hold.observe(lease, now);
    }
    hold.decide(current.as_ref(), now)
}

#[test]
fn a_missing_lease_is_created() {
    let mut hold = hold("orca-0");
    assert_eq!(look(&mut hold, None, Instant::now(), 0), Step::Create);
}

#[test]
fn a_free_lease_is_taken_at_once() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    let released = lease(None, wall(), "7");
    assert_eq!(look(&mut hold, Some(&released), start, 0), Step::Take);
    let emptied = lease(Some(""), wall(), "8");
    assert_eq!(look(&mut hold, Some(&emptied), start, 0), Step::Take);
}

/// Taken only once the record has not changed for a whole duration on this replica's own
/// clock: what the holder's clock wrote in `renewTime` does not count, so a holder whose
/// clock runs behind is not robbed.
#[test]
fn another_replicas_lease_is_taken_once_unchanged_for_a_duration_on_our_clock() {
    let mut hold = hold("orca-1");
    let start = Instant::now();
    let long_ago = wall() - secs(3_600);
    let theirs = lease(Some("orca-0"), long_ago, "7");
    assert_eq!(look(&mut hold, Some(&theirs), start, 0), Step::Wait);
    assert!(hold.held_by_another(start));
    assert_eq!(look(&mut hold, Some(&theirs), start, 7), Step::Wait);
    assert_eq!(look(&mut hold, Some(&theirs), start, 8), Step::Take);
    assert!(!hold.held_by_another(at(start, 8)));
}

#[test]
fn a_lease_renewed_in_time_is_never_taken() {
    let mut hold = hold("orca-1");
    let start = Instant::now();
    for second in 0..60 {
        let renewed = wall() + secs(second / 3 * 3);
        let theirs = lease(Some("orca-0"), renewed, &format!("{}", second / 3));
        let elapsed = u64::try_from(second).unwrap();
        assert_eq!(look(&mut hold, Some(&theirs), start, elapsed), Step::Wait);
    }
}

#[test]
fn our_lease_is_renewed_when_due_and_served_until_shortly_before_expiry() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    let ours = lease(Some("orca-0"), wall(), "7");
    hold.wrote(Some(ours.clone()), Some("6".to_owned()), start);
    assert!(hold.held(start));
    assert_eq!(look(&mut hold, Some(&ours), start, 2), Step::Wait);
    assert_eq!(
        look(&mut hold, Some(&ours), start, 3),
        Step::Renew,
        "due 3 s after"
    );
    assert!(hold.held(at(start, 5)));
    assert!(!hold.held(at(start, 6)), "stops 2 s before expiry");
    assert_eq!(hold.serving_until(), Some(at(start, 6)));
}

/// Issue 39, case 2: the hold was measured on the wall clock against the `renewTime` it
/// wrote. A wall clock stepped forward (NTP, an operator) wrote a `renewTime` an hour ahead,
/// and the replica went on serving for that hour after the other replica had taken the
/// node; a stepped-back one cut its holds short. The hold now runs on the boot clock from
/// when the write was sent, whatever `renewTime` says.
#[test]
fn the_hold_runs_on_the_boot_clock_from_the_write_whatever_the_wall_clock_wrote() {
    let start = Instant::now();
    for written in [wall() + secs(3_600), wall() - secs(3_600)] {
        let mut hold = hold("orca-0");
        let ours = lease(Some("orca-0"), written, "7");
        hold.wrote(Some(ours.clone()), Some("6".to_owned()), start);
        assert!(hold.held(at(start, 5)));
        assert!(
            !hold.held(at(start, 6)),
            "renewTime {written} does not count"
        );
        assert_eq!(look(&mut hold, Some(&ours), start, 2), Step::Wait);
        assert_eq!(look(&mut hold, Some(&ours), start, 3), Step::Renew);
    }
}

/// A renewal answered late counts from when it was sent, not answered: a replica stopped
/// for four seconds while its renewal was in flight has two left.
#[test]
fn a_late_answer_counts_from_when_the_write_was_sent() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    hold.wrote(Some(lease(Some("orca-0"), wall(), "7")), None, start);
    assert_eq!(hold.time_for_write(at(start, 4)), Duration::from_secs(2));
    assert!(!hold.held(at(start, 6)));
}

/// A write gets the time the hold has left, so a hung renewal cannot outlast the hold; with
/// no hold (a create or a take), the hold it would give.
#[test]
fn a_write_gets_the_time_the_hold_has_left() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    assert_eq!(hold.time_for_write(start), Duration::from_secs(6));
    hold.wrote(Some(lease(Some("orca-0"), wall(), "7")), None, start);
    assert_eq!(hold.time_for_write(at(start, 3)), Duration::from_secs(3));
    assert_eq!(
        hold.time_for_write(at(start, 7)),
        Duration::from_secs(6),
        "once lapsed, a renewal that lands gives a new hold"
    );
}

/// A renewal given up on may still land: the watch then shows a record naming this replica
/// that it does not know of. It is renewed (guarded by its version), never served on.
#[test]
fn a_record_from_a_write_given_up_on_is_renewed_before_it_is_served_on() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    hold.wrote(Some(lease(Some("orca-0"), wall(), "7")), None, start);
    hold.abandoned = true;
    let landed = lease(Some("orca-0"), wall() + secs(3), "8");
    assert_eq!(look(&mut hold, Some(&landed), start, 7), Step::Renew);
    assert!(!hold.held(at(start, 7)));
    assert_eq!(hold.serving_until(), None);
}

/// A restart keeps the replica's identity: the Lease names it, but this life wrote nothing
/// yet, so it renews at once to make the Lease its own before serving.
#[test]
fn a_lease_naming_us_from_an_earlier_life_is_renewed_at_once() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    let earlier = lease(Some("orca-0"), wall(), "7");
    assert_eq!(look(&mut hold, Some(&earlier), start, 0), Step::Renew);
    assert!(!hold.held(start), "not served before this life's write");
}

/// The watch may still show the Lease before this replica's renewal: the renewal counts.
#[test]
fn our_own_newer_write_counts_over_a_stale_watch() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    let before = lease(Some("orca-0"), wall(), "7");
    hold.wrote(Some(before.clone()), Some("6".to_owned()), start);
    let renewed = lease(Some("orca-0"), wall() + secs(3), "8");
    hold.wrote(Some(renewed.clone()), Some("7".to_owned()), at(start, 3));
    assert_eq!(hold.current(Some(&before)), Some(renewed.clone()));
    assert_eq!(look(&mut hold, Some(&before), start, 4), Step::Wait);
    assert!(hold.held(at(start, 8)));
    // Two writes behind, still this replica's.
    let older = lease(Some("orca-0"), wall() - secs(3), "6");
    assert_eq!(hold.current(Some(&older)), Some(renewed));
}

/// Right after taking a Lease, the watch still shows the previous holder's record (older
/// renewal, other holder): the take counts, the replica keeps serving.
#[test]
fn a_take_counts_over_the_previous_holders_record_still_on_the_watch() {
    let mut hold = hold("orca-1");
    let start = Instant::now();
    let theirs = lease(Some("orca-0"), wall() - secs(10), "7");
    hold.wrote(
        Some(lease(Some("orca-1"), wall(), "8")),
        Some("7".to_owned()),
        start,
    );
    assert_eq!(look(&mut hold, Some(&theirs), start, 0), Step::Wait);
    assert!(hold.held(start));
}

/// Created, and the watch has not shown the Lease yet: still this replica's.
#[test]
fn a_created_lease_not_on_the_watch_yet_is_held() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    hold.wrote(Some(lease(Some("orca-0"), wall(), "3")), None, start);
    assert_eq!(look(&mut hold, None, start, 0), Step::Wait);
    assert!(hold.held(start));
}

/// A write refused (someone wrote first) ends the hold at once.
#[test]
fn a_refused_write_ends_the_hold() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    hold.wrote(
        Some(lease(Some("orca-0"), wall(), "7")),
        Some("6".to_owned()),
        start,
    );
    hold.wrote(None, Some("7".to_owned()), start);
    assert!(!hold.held(start));
}

/// Taken by another replica (this one stalled past expiry): its write is newer, this one's
/// own record no longer counts and it stops serving at once.
#[test]
fn a_lease_taken_by_another_ends_our_hold() {
    let mut hold = hold("orca-0");
    let start = Instant::now();
    hold.wrote(
        Some(lease(Some("orca-0"), wall(), "7")),
        Some("6".to_owned()),
        start,
    );
    let taken = lease(Some("orca-1"), wall() + secs(9), "9");
    assert_eq!(look(&mut hold, Some(&taken), start, 9), Step::Wait);
    assert!(!hold.held(at(start, 1)));
    assert!(hold.held_by_another(at(start, 9)));
}

/// Mid-way through a rolling update that lengthens the Lease, the holder (new settings)
/// promises 20 s: a replica with the old 8 s waits the holder's 20 s, not its own.
#[test]
fn the_holders_longer_promise_is_waited_out() {
    let mut hold = hold("orca-1");
    let start = Instant::now();
    let mut theirs = lease(Some("orca-0"), wall(), "7");
    if let Some(spec) = theirs.spec.as_mut() {
        spec.lease_duration_seconds = Some(20);
    }
    assert_eq!(look(&mut hold, Some(&theirs), start, 0), Step::Wait);
    assert_eq!(look(&mut hold, Some(&theirs), start, 19), Step::Wait);
    assert!(hold.held_by_another(at(start, 19)));
    assert_eq!(look(&mut hold, Some(&theirs), start, 20), Step::Take);
}
