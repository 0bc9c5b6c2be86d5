//! Text a plugin wrote that reaches the Kubernetes API (a pod's status message, an Event, the
//! decision annotation): cut to a bound, saying so. A plugin is untrusted, and a status patch
//! carrying megabytes of its text would be refused, leaving the pod to loop.

use std::borrow::Cow;

/// Bytes of one plugin-written text kept for the API.
pub const MAX_PLUGIN_TEXT_BYTES: usize = 1024;

/// `text` whole when within [`MAX_PLUGIN_TEXT_BYTES`]; else its start, cut at a character
/// boundary, and a note of how long it was.
pub fn bounded(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_PLUGIN_TEXT_BYTES {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!(
        "{}… (cut: the plugin's text was {} bytes)",
        prefix(text, MAX_PLUGIN_TEXT_BYTES),
        text.len()
    ))
}

/// The longest start of `text` within `max` bytes that ends at a character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(bounded("no instance type fits"), "no instance type fits");
        let exact = "a".repeat(MAX_PLUGIN_TEXT_BYTES);
        assert_eq!(bounded(&exact), exact.as_str());
    }

    #[test]
    fn a_prefix_ends_at_a_character_within_the_bound() {
        for (text, max, expected) in [
            ("abc", 5, "abc"),
            ("abc", 2, "ab"),
            ("aé", 2, "a"),
            ("aé", 3, "aé"),
            ("é", 1, ""),
            ("", 0, ""),
        ] {
            assert_eq!(prefix(text, max), expected, "{text:?} {max}");
        }
    }

    #[test]
    fn long_text_is_cut_at_a_character_and_says_so() {
        let long = format!(
            "{}{}",
            "a".repeat(MAX_PLUGIN_TEXT_BYTES - 1),
            "é".repeat(1 << 20)
        );
        let cut = bounded(&long);
        assert!(cut.starts_with(&"a".repeat(MAX_PLUGIN_TEXT_BYTES - 1)));
        assert!(cut.ends_with(&format!(
            "… (cut: the plugin's text was {} bytes)",
            long.len()
        )));
        assert!(cut.len() < MAX_PLUGIN_TEXT_BYTES + 64, "{}", cut.len());
    }
}
