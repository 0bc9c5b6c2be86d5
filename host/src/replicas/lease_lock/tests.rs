//! The Lease writes against an apiserver that does not answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::*;

const DURATION: Duration = Duration::from_secs(8);

fn created() -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("orca-node-a".to_owned()),
            resource_version: Some("1".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("orca-0".to_owned()),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_duration_seconds: Some(8),
            ..LeaseSpec::default()
        }),
    }
}

/// Issue 39, case 2: a Lease write had no deadline, and kube's client retries 503 (and 429,
/// 504) with backoff for minutes, so a holder whose renewals hung stayed inside `look`, never
/// saw its hold end, and went on serving after another replica had taken the node. The
/// renewal is now given up on when the hold runs out (6 s here, on tokio's paused clock).
#[tokio::test(start_paused = true)]
async fn a_renewal_that_never_answers_is_given_up_on_when_the_hold_runs_out() {
    let created = created();
    // An apiserver that answers the create, and never anything after.
    let writes = Arc::new(AtomicUsize::new(0));
    let service = tower::service_fn({
        let (writes, created) = (writes.clone(), created.clone());
        move |_request: hyper::Request<kube::client::Body>| {
            let first = writes.fetch_add(1, Ordering::SeqCst) == 0;
            let body = serde_json::to_vec(&created).unwrap_or_default();
            async move {
                if !first {
                    std::future::pending::<()>().await;
                }
                hyper::Response::builder()
                    .status(201)
                    .body(kube::client::Body::from(body))
            }
        }
    });
    let client = kube::Client::new(service, "orca-system");
    // Renewals due at once: renewBefore is the whole duration.
    let mut lock = LeaseLock::new(
        Api::namespaced(client, "orca-system"),
        "orca-node-a".to_owned(),
        "orca-0".to_owned(),
        DURATION,
        DURATION,
    );
    assert_eq!(lock.look(None).await.unwrap(), Step::Create);
    let renewal = tokio::time::timeout(Duration::from_secs(3_600), lock.look(Some(&created)))
        .await
        .expect("the renewal is given up on within the 6 s the hold has, not after an hour");
    assert!(renewal.is_err(), "{renewal:?}");
    assert_eq!(
        writes.load(Ordering::SeqCst),
        2,
        "created, then one renewal"
    );
}
