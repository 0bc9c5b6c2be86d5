use std::path::Path;

use super::*;

const POD: &str =
    "pod: {metadata: {name: p}, spec: {containers: [{name: main, image: busybox}]}}\n";

fn parse(text: &str) -> Result<Case, CaseError> {
    Case::parse(Path::new("cases/c.yaml"), text)
}

fn problem(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn a_case_with_every_decision_field_reads_into_a_decided_expectation() {
    let case = parse(&format!(
        "description: gpu\n{POD}settings: {{teams: {{ml: [g6.xlarge]}}}}\nexpect:\n  \
         instanceType: g6.xlarge\n  selectedBy: team\n  market: spot\n  tags: {{team: ml}}\n"
    ))
    .unwrap();
    assert_eq!(case.description.as_deref(), Some("gpu"));
    assert_eq!(
        case.settings.as_deref(),
        Some(r#"{"teams":{"ml":["g6.xlarge"]}}"#)
    );
    assert!(matches!(case.pod, PodSource::Inline(_)));
    let Expectation::Decided(expected) = case.expect else {
        panic!("{:?}", case.expect);
    };
    assert_eq!(expected.instance_type.as_deref(), Some("g6.xlarge"));
    assert_eq!(expected.selected_by.as_deref(), Some("team"));
    assert_eq!(expected.market, Some(Market::Spot));
    assert_eq!(expected.tags["team"], "ml");
}

#[test]
fn a_failure_reads_its_reason_and_kind_as_the_hosts_enums() {
    let case = parse(
        "podFile: ../pod.yaml\nconfig: config.yaml\nexpect:\n  failure:\n    reason: PolicyError\n    \
         kind: noMatch\n    plugin: team\n    messageContains: at most\n",
    )
    .unwrap();
    let PodSource::File(pod) = &case.pod else {
        panic!("{:?}", case.pod);
    };
    assert_eq!(pod, Path::new("cases/../pod.yaml"));
    assert_eq!(case.config.as_deref(), Some(Path::new("cases/config.yaml")));
    assert_eq!(
        case.expect,
        Expectation::Fails(ExpectedFailure {
            reason: PlanFailure::PolicyError,
            kind: Some(FailureKind::NoMatch),
            plugin: Some("team".to_owned()),
            message_contains: Some("at most".to_owned()),
        })
    );
}

/// A malformed case names the file and the field, whatever is wrong with it.
#[test]
fn malformed_cases_are_refused_naming_the_file_and_the_field() {
    let expect = "expect: {instanceType: m5.large}\n";
    for (text, wanted) in [
        (
            format!("{POD}{expect}instanceType: m5.large\n"),
            "unknown field `instanceType`",
        ),
        (
            format!("{POD}expect: {{instancetype: m5.large}}\n"),
            "unknown field `instancetype`",
        ),
        (
            format!("{POD}expect: {{failure: {{reason: Oops}}}}\n"),
            "Oops",
        ),
        (
            format!("{POD}expect: {{failure: {{reason: PolicyError, kind: nomatch}}}}\n"),
            "nomatch",
        ),
        (format!("{POD}expect: {{market: cheap}}\n"), "cheap"),
        (POD.to_owned(), "missing field `expect`"),
        (expect.to_owned(), "pod: missing"),
        (
            format!("{POD}podFile: p.yaml\n{expect}"),
            "pod: give the pod inline or as podFile",
        ),
        (
            format!("{POD}expect: {{}}\n"),
            "expect: names nothing to check",
        ),
        (
            format!("{POD}expect: {{market: spot, failure: {{reason: PolicyError}}}}\n"),
            "expect: failure cannot be combined",
        ),
        (
            format!("{POD}settings: [1]\n{expect}"),
            "settings: must be a mapping",
        ),
        (
            format!("{POD}settings: {{}}\nconfig: c.yaml\n{expect}"),
            "settings: a case with a config",
        ),
    ] {
        let message = problem(&text);
        assert!(message.starts_with("cases/c.yaml: "), "{text}: {message}");
        assert!(message.contains(wanted), "{text}: {message}");
    }
}
