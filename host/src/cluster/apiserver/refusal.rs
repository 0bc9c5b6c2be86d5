//! Reading which fields an apiserver refused out of its answer.
//!
//! A server-side apply that names a field the server's schema lacks is refused whole, the
//! field named in the message (structured-merge-diff's `ValidationError`: `.path: field not
//! declared in schema`, one per line under `errors:` when there are several). A write with
//! strict field validation names it as `unknown field "path"`. orca leaves such a field out
//! and writes again, so one field the server does not know never blocks the rest.

/// The paths of the fields `message` says the server does not know, as
/// [`super::Schema::prune`] names them (`status.declaredFeatures`, a list item's key as
/// `[]`); empty when the refusal is about something else.
pub fn unknown_fields(message: &str) -> Vec<String> {
    let mut fields = Vec::new();
    for line in message.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(NOT_DECLARED) {
            let before = &rest[..at];
            let start = before.rfind("): ").map_or(0, |i| i + 3);
            if let Some(path) = normalised(before[start..].trim()) {
                fields.push(path);
            }
            rest = &rest[at + NOT_DECLARED.len()..];
        }
        let mut rest = line;
        while let Some(at) = rest.find(UNKNOWN_FIELD) {
            let quoted = &rest[at + UNKNOWN_FIELD.len()..];
            let Some(end) = quoted.find('"') else { break };
            if let Some(path) = normalised(&quoted[..end]) {
                fields.push(path);
            }
            rest = &quoted[end..];
        }
    }
    fields.dedup();
    fields
}

const NOT_DECLARED: &str = ": field not declared in schema";
const UNKNOWN_FIELD: &str = "unknown field \"";

/// `.status.conditions[type="Ready"].foo` → `status.conditions[].foo`; `None` for text that
/// is not a field path.
fn normalised(path: &str) -> Option<String> {
    let path = path.strip_prefix('.').unwrap_or(path);
    if path.is_empty() || path.contains(char::is_whitespace) && !path.contains('[') {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for c in path.chars() {
        if quoted {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => quoted = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '"' if depth > 0 => quoted = true,
            '[' => {
                if depth == 0 {
                    out.push_str("[]");
                }
                depth += 1;
            }
            ']' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    (!out.is_empty() && !out.starts_with('[')).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_fields_the_server_does_not_know() {
        let cases: [(&str, &[&str]); 8] = [
            // What a 1.33 apiserver answered orca's Node status apply (issue 59).
            (
                "failed to create typed patch object (/old-sim-node; /v1, Kind=Node): .status.declaredFeatures: field not declared in schema",
                &["status.declaredFeatures"],
            ),
            // Several at once.
            (
                "failed to create typed patch object (/n; /v1, Kind=Node): errors:\n  .status.declaredFeatures: field not declared in schema\n  .status.nodeInfo.swap: field not declared in schema",
                &["status.declaredFeatures", "status.nodeInfo.swap"],
            ),
            // Inside an item of a list keyed by type: the item's key is not part of the field.
            (
                "failed to create typed patch object (/n; /v1, Kind=Node): .status.conditions[type=\"Ready\"].observedGeneration: field not declared in schema",
                &["status.conditions[].observedGeneration"],
            ),
            // A key value with a space and a bracket in it.
            (
                "failed to create typed patch object (/n; coordination.k8s.io/v1, Kind=Lease): .spec.list[name=\"a ]b\"].x: field not declared in schema",
                &["spec.list[].x"],
            ),
            // Strict field validation.
            (
                "strict decoding error: unknown field \"status.declaredFeatures\", unknown field \"spec.newField\"",
                &["status.declaredFeatures", "spec.newField"],
            ),
            // Refusals of other kinds name nothing.
            (
                "Operation cannot be fulfilled on nodes \"n\": the object has been modified",
                &[],
            ),
            (
                "nodes \"n\" is forbidden: User \"orca\" cannot patch resource \"nodes/status\"",
                &[],
            ),
            ("", &[]),
        ];
        for (message, expected) in cases {
            assert_eq!(unknown_fields(message), expected, "{message}");
        }
    }
}
