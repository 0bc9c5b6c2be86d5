//! An instance's tags, each write visible only after its own lag.

use std::collections::BTreeMap;

use jiff::Timestamp;

#[derive(Clone, Debug)]
struct TagWrite {
    key: String,
    value: String,
    written_at: Timestamp,
    visible_at: Timestamp,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct TagLog {
    writes: Vec<TagWrite>,
}

impl TagLog {
    pub fn write(&mut self, key: &str, value: &str, written_at: Timestamp, visible_at: Timestamp) {
        self.writes.push(TagWrite {
            key: key.to_owned(),
            value: value.to_owned(),
            written_at,
            visible_at: visible_at.max(written_at),
        });
    }

    /// The tags a reader sees at `at`: for each key, the latest write that has
    /// become visible by then (an older value until the newer one shows).
    pub fn visible_at(&self, at: Timestamp) -> BTreeMap<String, String> {
        latest_per_key(self.writes.iter().filter(|write| write.visible_at <= at))
    }

    /// Every tag at its final value, visible yet or not.
    pub fn final_values(&self) -> BTreeMap<String, String> {
        latest_per_key(self.writes.iter())
    }

    /// Forgets writes scheduled after `at` (a bootstrap that will never run).
    pub fn cancel_after(&mut self, at: Timestamp) {
        self.writes.retain(|write| write.written_at <= at);
    }
}

fn latest_per_key<'a>(writes: impl Iterator<Item = &'a TagWrite>) -> BTreeMap<String, String> {
    let mut latest: BTreeMap<&str, &TagWrite> = BTreeMap::new();
    for write in writes {
        // `>=` so that of two writes at one instant the later-made one wins.
        let newer = latest
            .get(write.key.as_str())
            .is_none_or(|current| write.written_at >= current.written_at);
        if newer {
            latest.insert(write.key.as_str(), write);
        }
    }
    latest
        .into_iter()
        .map(|(key, write)| (key.to_owned(), write.value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::t;

    #[test]
    fn a_tag_is_invisible_until_its_lag_has_passed() {
        let mut tags = TagLog::default();
        tags.write("pod", "a", t(0), t(2));
        assert!(tags.visible_at(t(1)).is_empty());
        assert_eq!(
            tags.visible_at(t(2)).get("pod").map(String::as_str),
            Some("a")
        );
    }

    #[test]
    fn an_overwritten_tag_shows_its_old_value_until_the_new_one_is_visible() {
        let mut tags = TagLog::default();
        tags.write("exit", "0", t(0), t(0));
        tags.write("exit", "143", t(5), t(7));
        assert_eq!(
            tags.visible_at(t(6)).get("exit").map(String::as_str),
            Some("0")
        );
        assert_eq!(
            tags.visible_at(t(7)).get("exit").map(String::as_str),
            Some("143")
        );
        assert_eq!(
            tags.final_values().get("exit").map(String::as_str),
            Some("143")
        );
    }
}
