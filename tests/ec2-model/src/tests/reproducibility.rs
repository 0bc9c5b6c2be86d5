use super::*;
use crate::WorkloadEnd;

/// Drives a hostile model through a long, varied script and writes down
/// every answer. The script's own choices come from a fixed RNG, and depend
/// on the model's answers only through what it was told.
fn transcript(seed: u64) -> Vec<String> {
    let model = Ec2Model::new(seed, Behaviour::hostile());
    let mut script = fastrand::Rng::with_seed(0x5eed);
    let mut known: Vec<String> = Vec::new();
    let mut lines = Vec::new();
    for step in 0..400_i64 {
        let now = at(step * 250);
        let pick = |script: &mut fastrand::Rng, known: &[String]| -> String {
            if known.is_empty() {
                "i-00000000".to_owned()
            } else {
                known[script.usize(0..known.len())].clone()
            }
        };
        let line = match script.u8(0..9) {
            0 | 1 => {
                let request = if script.bool() {
                    spot("p")
                } else {
                    launch("p")
                };
                let request = RunInstances {
                    client_token: Some(format!("pod-{}", script.u8(0..30))),
                    subnet_id: Some([SUBNET_A, SUBNET_B][script.usize(0..2)].to_owned()),
                    ..request
                };
                let answer = model.run_instances(now, &request);
                if let Ok(instance) = &answer
                    && !known.contains(&instance.instance_id)
                {
                    known.push(instance.instance_id.clone());
                }
                format!("run {answer:?}")
            }
            2 => format!(
                "describe {:?}",
                model.describe_instances(now, &[Filter::tag("orca.research/pod", ["p"])])
            ),
            3 => {
                let id = pick(&mut script, &known);
                format!("terminate {:?}", model.terminate_instances(now, &[id]))
            }
            4 => {
                let id = pick(&mut script, &known);
                format!("console {:?}", model.get_console_output(now, &id))
            }
            5 => {
                let id = pick(&mut script, &known);
                let end = WorkloadEnd {
                    pod_exit_code: 0,
                    containers: vec![("main".to_owned(), 0)],
                    finished_at: now,
                };
                format!("complete {}", model.complete_workload(now, &id, &end))
            }
            6 => {
                let id = pick(&mut script, &known);
                format!("interrupt {:?}", model.interrupt_spot(now, &id))
            }
            7 => {
                let id = pick(&mut script, &known);
                format!("stop-by-someone {}", model.stop_by_someone(now, &id))
            }
            _ => {
                let id = pick(&mut script, &known);
                format!(
                    "protect {}",
                    model.protect(now, &id, at(step * 250 + 3_000))
                )
            }
        };
        lines.push(line);
    }
    lines.push(format!("notices {:?}", model.take_notices()));
    lines.push(format!("history {:?}", model.history()));
    lines
}

#[test]
fn the_same_seed_and_calls_give_the_same_answers() {
    let first = transcript(424_242);
    let second = transcript(424_242);
    assert_eq!(first, second);
    // The script exercised the faults, not just the happy path.
    let text = first.join("\n");
    for expected in [
        "RequestLimitExceeded",
        "InvalidInstanceID.NotFound",
        "RequestFailed",
        "InsufficientInstanceCapacity",
        "complete true",
        "interrupt Some",
    ] {
        assert!(text.contains(expected), "no {expected} in the transcript");
    }
}

#[test]
fn another_seed_gives_other_answers() {
    assert_ne!(transcript(1), transcript(2));
}

#[test]
fn the_model_reports_its_seed() {
    assert_eq!(Ec2Model::new(77, Behaviour::hostile()).seed(), 77);
}
