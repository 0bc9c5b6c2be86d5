//! Conveniences for reading a [`Pod`].

use crate::Pod;

/// Lookups on the pod's string maps.
pub trait PodExt {
    fn annotation(&self, key: &str) -> Option<&str>;
    fn label(&self, key: &str) -> Option<&str>;
    fn node_selector(&self, key: &str) -> Option<&str>;
}

fn lookup<'a>(map: &'a [(String, String)], key: &str) -> Option<&'a str> {
    map.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

impl PodExt for Pod {
    fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }

    fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }

    fn node_selector(&self, key: &str) -> Option<&str> {
        lookup(&self.node_selector, key)
    }
}
