//! AWS's tag rules, shared by the host (which checks every plugin's output) and plugins.

/// At most this many tags on one resource.
pub const MAX_TAGS: usize = 50;
pub const MAX_KEY_LEN: usize = 128;
pub const MAX_VALUE_LEN: usize = 256;

/// Why a tag is not acceptable to EC2, or `Ok`.
///
/// # Errors
/// A message naming the key and the rule it breaks.
pub fn validate_tag(key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("tag key is empty".to_owned());
    }
    if key.chars().count() > MAX_KEY_LEN {
        return Err(format!(
            "tag key {key:?} is longer than {MAX_KEY_LEN} characters"
        ));
    }
    if value.chars().count() > MAX_VALUE_LEN {
        return Err(format!(
            "value of tag {key:?} is longer than {MAX_VALUE_LEN} characters"
        ));
    }
    if key.to_ascii_lowercase().starts_with("aws:") {
        return Err(format!("tag key {key:?} uses the reserved aws: prefix"));
    }
    if let Some(bad) = key.chars().chain(value.chars()).find(|c| !allowed(*c)) {
        return Err(format!(
            "tag {key:?} contains {bad:?}; allowed are letters, digits, spaces and _ . : / = + - @"
        ));
    }
    Ok(())
}

fn allowed(c: char) -> bool {
    c.is_alphanumeric() || c == ' ' || "_.:/=+-@".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_rules() {
        assert!(validate_tag("team", "ml-research").is_ok());
        assert!(validate_tag("orca.research/pod-name", "default/gpu-training").is_ok());
        assert!(validate_tag("", "x").unwrap_err().contains("empty"));
        assert!(
            validate_tag("aws:cloudformation", "x")
                .unwrap_err()
                .contains("aws:")
        );
        assert!(validate_tag("AWS:x", "x").unwrap_err().contains("aws:"));
        assert!(
            validate_tag(&"k".repeat(129), "x")
                .unwrap_err()
                .contains("128")
        );
        assert!(
            validate_tag("k", &"v".repeat(257))
                .unwrap_err()
                .contains("256")
        );
        assert!(validate_tag("team", "a;b").unwrap_err().contains("';'"));
    }
}
