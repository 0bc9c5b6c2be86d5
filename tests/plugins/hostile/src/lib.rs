//! Misbehaves as its settings say, so tests can prove the sandbox holds: `loop` never returns,
//! `grow` allocates without end, `trap` panics, `output` floods stdout, `log-flood` floods the
//! host's `log` import, `long-error` fails with 2 MiB of text, `bad-type` answers an instance
//! type that does not exist, `dear-first` answers p5.48xlarge (about $55/h on demand) before
//! m7i.large and `dear-only` p5.48xlarge alone (a selector gone expensive, which only the host's
//! guardrails stop), `bad-tags` answers tags AWS would refuse, `forge-exit-code` sets
//! the exit-code tag orca reads to decide a pod's outcome, `decline` declines the pod and
//! `no-match` refuses it, `unsupported` answers that from a hook it lists (well-behaved
//! answers, for the chain's `onError`), `count` answers how many calls its instance has served
//! and `hoard` keeps 8 MiB more per call (both show whether an instance is reused), and
//! `tag-context` tags the instance type and market the host tells its taggers, and `nap:N`
//! sleeps N times 10 ms (wall time that is not CPU time) before answering. Anything else
//! answers normally. The pod's `hostile.orca.research/mode` annotation, else the settings,
//! picks the behaviour. Settings may be the bare word or a JSON string (`"loop"`), as config.yaml
//! passes them.

use orca_plugin_sdk::{
    Candidate, Hook, LogLevel, Market, Plugin, Pod, PodExt, PolicyError, Tag, TagContext, log,
};

/// A pod annotation that overrides the settings, so one loaded plugin can misbehave per pod.
pub const MODE_ANNOTATION: &str = "hostile.orca.research/mode";

pub struct Hostile;

impl Plugin for Hostile {
    const NAME: &'static str = "hostile";
    const VERSION: &'static str = "0.0.1";
    const HOOKS: &'static [Hook] = &[Hook::SelectInstance, Hook::BuildTags];

    fn select_instance(pod: &Pod, settings: &str) -> Result<Vec<Candidate>, PolicyError> {
        match mode(pod, settings) {
            "loop" => {
                let mut counter: u64 = 0;
                loop {
                    counter = std::hint::black_box(counter.wrapping_add(1));
                }
            }
            "grow" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "trap" => panic!("hostile plugin panics on purpose"),
            nap if nap.starts_with("nap:") => {
                let naps: u32 = nap["nap:".len()..].parse().unwrap_or(0);
                for _ in 0..naps {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Ok(vec![Candidate {
                    instance_type: "m7i.large".into(),
                    reason: "after its naps".into(),
                }])
            }
            "output" => {
                let line = "x".repeat(1024);
                for _ in 0..100_000 {
                    println!("{line}");
                }
                Ok(Vec::new())
            }
            "log-flood" => {
                let line = "y".repeat(1024);
                for _ in 0..10_000 {
                    log(LogLevel::Info, &line);
                }
                Ok(vec![Candidate {
                    instance_type: "m7i.large".into(),
                    reason: "logged a lot first".into(),
                }])
            }
            "count" => {
                // Calls this instance has answered: 1 in a fresh instance every time, rising
                // in one reused between calls.
                static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                Ok(vec![Candidate {
                    instance_type: "m7i.large".into(),
                    reason: format!("call {calls}"),
                }])
            }
            "hoard" => {
                // Keeps 8 MiB more than the last call did, across calls of a reused instance.
                static HOARD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
                let mut hoard = HOARD.lock().unwrap_or_else(|p| p.into_inner());
                hoard.push(vec![1u8; 8 << 20]);
                Ok(vec![Candidate {
                    instance_type: "m7i.large".into(),
                    reason: format!("holding {} MiB", hoard.len() * 8),
                }])
            }
            "long-error" => Err(PolicyError::Failed("z".repeat(2 << 20))),
            "decline" => Err(PolicyError::Declined("not a hostile pod".into())),
            "no-match" => Err(PolicyError::NoMatch("nothing hostile fits".into())),
            "unsupported" => Err(PolicyError::Unsupported),
            "bad-type" => Ok(vec![Candidate {
                instance_type: "z9.imaginary".into(),
                reason: "made up".into(),
            }]),
            "dear-first" => Ok(vec![
                Candidate {
                    instance_type: "p5.48xlarge".into(),
                    reason: "the dearest first".into(),
                },
                Candidate {
                    instance_type: "m7i.large".into(),
                    reason: "then a sensible one".into(),
                },
            ]),
            "dear-only" => Ok(vec![Candidate {
                instance_type: "p5.48xlarge".into(),
                reason: "nothing but the dearest".into(),
            }]),
            _ => Ok(vec![Candidate {
                instance_type: "m7i.large".into(),
                reason: "well behaved".into(),
            }]),
        }
    }

    fn build_tags(
        pod: &Pod,
        settings: &str,
        context: &TagContext,
    ) -> Result<Vec<Tag>, PolicyError> {
        match mode(pod, settings) {
            // What the host says will launch, so a test sees what the taggers are told.
            "tag-context" => Ok(vec![
                Tag {
                    key: "tagged-type".into(),
                    value: context.instance_type.clone(),
                },
                Tag {
                    key: "tagged-market".into(),
                    value: match context.market {
                        Market::Spot => "spot".into(),
                        Market::OnDemand => "on-demand".into(),
                    },
                },
            ]),
            "bad-tags" => Ok(vec![Tag {
                key: "aws:owner".into(),
                value: "me".into(),
            }]),
            "forge-exit-code" => Ok(vec![Tag {
                key: "orca.research/exit-code".into(),
                value: "0".into(),
            }]),
            // As many tags as EC2's 50 leave beside orca's six ownership tags, forgetting the
            // cluster's id the provider adds at launch.
            "fill-tags" => Ok((0..44)
                .map(|n| Tag {
                    key: format!("team-{n}"),
                    value: "x".into(),
                })
                .collect()),
            // Exactly as many as EC2's 50 leave beside orca's six and the cluster's id: they fit
            // alone, not merged with another tagger's.
            "most-tags" => Ok((0..43)
                .map(|n| Tag {
                    key: format!("team-{n}"),
                    value: "x".into(),
                })
                .collect()),
            _ => Ok(vec![Tag {
                key: "ManagedBy".into(),
                value: "ORCA".into(),
            }]),
        }
    }
}

/// The pod's `hostile.orca.research/mode` annotation, else the settings.
fn mode<'a>(pod: &'a Pod, settings: &'a str) -> &'a str {
    pod.annotation(MODE_ANNOTATION)
        .unwrap_or(settings)
        .trim_matches('"')
}

orca_plugin_sdk::register_plugin!(Hostile);
