//! Shipping a pod's container output to CloudWatch Logs (`provider.aws.logs`) with Docker's
//! `awslogs` logging driver: the options every container is created with, and the stream each
//! one writes to.
//!
//! What only the instance knows is added by the bootstrap when it creates a container: the
//! stream (`--log-opt awslogs-stream=UID/CONTAINER`, from the names the pod's data carries)
//! and the region (`--log-opt awslogs-region=…`, read from IMDS; left out when IMDS does not
//! answer, and Docker then asks IMDS itself).
//!
//! # Caveats
//! - The instance role needs `logs:CreateLogStream` and `logs:PutLogEvents` on the group
//!   (statement `ShipTheContainersLogs` of `deploy/iam/workload.json`); orca creates the
//!   group, never the instance. Every container of every pod can use that role, so any of
//!   them can write to any stream of the group.
//! - `docker logs`, which copies a container's output to the serial console, reads Docker's
//!   dual-logging cache (Docker 20.10 or later), which these options keep on even where the
//!   daemon turns it off by default.

use crate::config::{LogDelivery, LogsConfig};

/// Where a pod's containers send their output, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogShipping {
    /// The CloudWatch Logs group (it exists: orca creates it at startup).
    pub group: String,
    pub delivery: LogDelivery,
    /// The per-container buffer of non-blocking delivery, in bytes.
    pub buffer_bytes: usize,
    /// The pod's UID, the first part of its containers' streams.
    pub pod_uid: String,
}

impl LogShipping {
    /// The shipping of the pod `pod_uid` under `config`.
    pub fn of(config: &LogsConfig, pod_uid: &str) -> LogShipping {
        LogShipping {
            group: config.group.clone(),
            delivery: config.delivery,
            buffer_bytes: config.buffer_bytes(),
            pod_uid: pod_uid.to_owned(),
        }
    }

    /// The stream `container` of this pod writes to.
    pub fn stream(&self, container: &str) -> String {
        log_stream(&self.pod_uid, container)
    }

    /// The `docker create` options every container of the pod gets, one argument each (not
    /// shell words): the driver, the group, the delivery mode. The stream and the region are
    /// the bootstrap's to add.
    pub fn docker_options(&self) -> Vec<String> {
        let mut options = vec!["--log-driver".to_owned(), "awslogs".to_owned()];
        let mut opt = |value: String| {
            options.push("--log-opt".to_owned());
            options.push(value);
        };
        opt(format!("awslogs-group={}", self.group));
        // The group is orca's to create, with its retention; a missing one is an error.
        opt("awslogs-create-group=false".to_owned());
        // `docker logs` (the console copy) reads this cache; a daemon may disable it by default.
        opt("cache-disabled=false".to_owned());
        match self.delivery {
            LogDelivery::NonBlocking => {
                opt("mode=non-blocking".to_owned());
                opt(format!("max-buffer-size={}", self.buffer_bytes));
            }
            LogDelivery::Blocking => opt("mode=blocking".to_owned()),
        }
        options
    }
}

/// The CloudWatch Logs stream a container of a pod writes to: `UID/CONTAINER`. Pod UIDs and
/// container names never contain `/` or `:`, so the stream names one container of one pod.
pub fn log_stream(pod_uid: &str, container: &str) -> String {
    format!("{pod_uid}/{container}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(delivery: LogDelivery, buffer_size: &str) -> LogsConfig {
        LogsConfig {
            group: "/orca/pods".to_owned(),
            retention_days: 30,
            delivery,
            buffer_size: buffer_size.to_owned(),
            endpoint_url: None,
        }
    }

    #[test]
    fn each_delivery_becomes_its_awslogs_options() {
        let cases = [
            (
                LogDelivery::NonBlocking,
                "4Mi",
                "--log-driver awslogs --log-opt awslogs-group=/orca/pods \
                 --log-opt awslogs-create-group=false --log-opt cache-disabled=false \
                 --log-opt mode=non-blocking --log-opt max-buffer-size=4194304",
            ),
            (
                LogDelivery::NonBlocking,
                "1000",
                "--log-driver awslogs --log-opt awslogs-group=/orca/pods \
                 --log-opt awslogs-create-group=false --log-opt cache-disabled=false \
                 --log-opt mode=non-blocking --log-opt max-buffer-size=1000",
            ),
            (
                LogDelivery::Blocking,
                "4Mi",
                "--log-driver awslogs --log-opt awslogs-group=/orca/pods \
                 --log-opt awslogs-create-group=false --log-opt cache-disabled=false \
                 --log-opt mode=blocking",
            ),
        ];
        for (delivery, buffer_size, expected) in cases {
            let shipping = LogShipping::of(&config(delivery, buffer_size), "u-1");
            assert_eq!(
                shipping.docker_options().join(" "),
                expected,
                "{delivery:?} with {buffer_size}"
            );
        }
    }

    #[test]
    fn every_option_value_is_one_argument_even_with_an_unusual_group() {
        let mut logs = config(LogDelivery::Blocking, "4Mi");
        logs.group = "team #1/pods".to_owned();
        let options = LogShipping::of(&logs, "u-1").docker_options();
        assert_eq!(options[3], "awslogs-group=team #1/pods");
        assert!(
            options.chunks(2).all(|pair| pair[0].starts_with("--log-")),
            "{options:?}"
        );
    }

    #[test]
    fn a_containers_stream_is_its_pods_uid_then_its_name() {
        let cases = [
            ("u-1", "trainer", "u-1/trainer"),
            (
                "0f8e4a3c-5b7d-4e21-9c6a-1d2e3f4a5b6c",
                "fetch",
                "0f8e4a3c-5b7d-4e21-9c6a-1d2e3f4a5b6c/fetch",
            ),
        ];
        for (uid, container, stream) in cases {
            assert_eq!(log_stream(uid, container), stream);
            let shipping = LogShipping::of(&config(LogDelivery::NonBlocking, "4Mi"), uid);
            assert_eq!(shipping.stream(container), stream);
        }
    }

    #[test]
    fn the_shipping_takes_the_group_delivery_and_buffer_from_the_config() {
        let shipping = LogShipping::of(&config(LogDelivery::Blocking, "2Mi"), "u-9");
        assert_eq!(
            shipping,
            LogShipping {
                group: "/orca/pods".to_owned(),
                delivery: LogDelivery::Blocking,
                buffer_bytes: 2 << 20,
                pod_uid: "u-9".to_owned(),
            }
        );
    }
}
