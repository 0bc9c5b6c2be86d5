//! The four events as AWS documents them, and what is not one of them.

use super::super::samples;
use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn a_spot_warning_gives_the_instance_two_minutes() {
    let notices = parse(samples::SPOT_INTERRUPTION).unwrap().notices;
    assert_eq!(
        notices,
        [Notice {
            kind: NoticeKind::SpotInterruption,
            instance_id: "i-1234567890abcdef0".to_owned(),
            time: at("2024-03-05T14:20:00Z"),
            deadline: Some(at("2024-03-05T14:22:00Z")),
            state: None,
            action: Some("terminate".to_owned()),
            description: "EC2 will terminate spot instance i-1234567890abcdef0 at \
                          2024-03-05T14:22:00Z"
                .to_owned(),
        }]
    );
}

#[test]
fn a_hibernating_spot_instance_has_no_warning_time() {
    let body = samples::SPOT_INTERRUPTION.replace("\"terminate\"", "\"hibernate\"");
    let notice = &parse(&body).unwrap().notices[0];
    assert_eq!(notice.deadline, Some(notice.time));
    assert_eq!(notice.action.as_deref(), Some("hibernate"));
}

#[test]
fn a_rebalance_recommendation_names_its_instance() {
    let notices = parse(samples::REBALANCE_RECOMMENDATION).unwrap().notices;
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, NoticeKind::RebalanceRecommendation);
    assert_eq!(notices[0].instance_id, "i-1234567890abcdef0");
    assert_eq!(notices[0].time, at("2024-03-05T14:18:00Z"));
    assert_eq!(notices[0].deadline, None);
}

#[test]
fn a_state_change_carries_the_new_state() {
    let notices = parse(samples::STATE_CHANGE).unwrap().notices;
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, NoticeKind::StateChange);
    assert_eq!(notices[0].instance_id, "i-abcd1111");
    assert_eq!(notices[0].state.as_deref(), Some("stopping"));
    assert_eq!(
        notices[0].description,
        "instance i-abcd1111 is now stopping"
    );
}

#[test]
fn a_health_scheduled_change_gives_one_notice_per_instance_with_its_start_time() {
    let notices = parse(samples::SCHEDULED_CHANGE).unwrap().notices;
    let ids: Vec<&str> = notices.iter().map(|n| n.instance_id.as_str()).collect();
    // i-abcd1111 is in both resources and affectedEntities; the volume is not an instance.
    assert_eq!(ids, ["i-abcd1111", "i-0123456789abcdef0"]);
    for notice in &notices {
        assert_eq!(notice.kind, NoticeKind::ScheduledChange);
        assert_eq!(notice.time, at("2023-01-27T01:43:21Z"));
        assert_eq!(notice.deadline, Some(at("2023-02-06T10:00:00Z")));
        assert!(
            notice
                .description
                .contains("AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"),
            "{}",
            notice.description
        );
    }
}

#[test]
fn a_health_start_time_may_be_iso_8601() {
    let body = samples::SCHEDULED_CHANGE.replace(
        "\"startTime\": \"Mon, 06 Feb 2023 10:00:00 GMT\"",
        "\"startTime\": \"2023-02-06T10:00:00.000Z\"",
    );
    assert_eq!(
        parse(&body).unwrap().notices[0].deadline,
        Some(at("2023-02-06T10:00:00Z"))
    );
}

#[test]
fn every_event_says_which_account_and_region_it_comes_from() {
    assert_eq!(
        parse(samples::SPOT_INTERRUPTION).unwrap().origin,
        Origin {
            account: "123456789012".to_owned(),
            region: "us-east-2".to_owned(),
        }
    );
    assert_eq!(
        parse(samples::SCHEDULED_CHANGE).unwrap().origin.to_string(),
        "account 123456789012, region us-east-1"
    );
}

#[test]
fn garbage_is_an_error_that_says_what_was_wrong() {
    let cases: [(String, &str); 10] = [
        ("".to_owned(), "not an EventBridge event"),
        ("{not json".to_owned(), "not an EventBridge event"),
        ("[1, 2]".to_owned(), "not an EventBridge event"),
        (
            samples::SPOT_INTERRUPTION.replace("\"account\": \"123456789012\",", ""),
            "missing field `account`",
        ),
        (
            samples::SPOT_INTERRUPTION.replace("Interruption Warning", "Surprise"),
            "unexpected event",
        ),
        (
            samples::SCHEDULED_CHANGE.replace("\"scheduledChange\"", "\"issue\""),
            "only service \"EC2\", category \"scheduledChange\"",
        ),
        (
            samples::SPOT_INTERRUPTION.replace("\"instance-id\"", "\"instance\""),
            "missing field `instance-id`",
        ),
        (
            samples::STATE_CHANGE.replace("i-abcd1111\"", "web-1\""),
            "invalid detail.instance-id \"web-1\"",
        ),
        (
            samples::REBALANCE_RECOMMENDATION.replace("2024-03-05T14:18:00Z", "yesterday"),
            "invalid time \"yesterday\"",
        ),
        (
            samples::SCHEDULED_CHANGE
                .replace("i-abcd1111", "vol-abcd1111")
                .replace("i-0123456789abcdef0", "UNKNOWN"),
            "names no EC2 instance",
        ),
    ];
    for (body, expected) in cases {
        let error = parse(&body).unwrap_err();
        let text = crate::support::errors::error_chain(&error);
        assert!(text.contains(expected), "{body}\n→ {text}");
    }
}

#[test]
fn kinds_have_stable_label_values() {
    let labels: Vec<&str> = EVENTS.iter().map(|(_, _, kind)| kind.as_str()).collect();
    assert_eq!(
        labels,
        [
            "spot-interruption",
            "rebalance-recommendation",
            "scheduled-change",
            "state-change"
        ]
    );
}
