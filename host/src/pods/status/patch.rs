//! Writing a pod status: whether a write is needed at all, and the strategic merge patch that
//! leaves nothing stale behind.

use k8s_openapi::api::core::v1::PodStatus;

/// Whether writing `desired` would change `current`: a field differs, or `current` holds a
/// field orca owns that `desired` leaves out (a Pending message on a Running pod). Lists
/// merge by the keys the apiserver uses (`type` for conditions, `name` for container
/// statuses, `ip` for IPs), so fields other components own never cause a write, and a
/// reconcile after our own write is a no-op rather than a loop.
pub fn needs_write(current: Option<&PodStatus>, desired: &PodStatus) -> bool {
    let Some(current) = current else { return true };
    let current = serde_json::to_value(current).unwrap_or_default();
    let desired = serde_json::to_value(desired).unwrap_or_default();
    !covers(&current, &desired) || has_stale(&current, &desired)
}

/// The strategic merge patch that turns `current` into `desired`: `desired` itself, plus an
/// explicit `null` for each field orca owns that `current` has and `desired` leaves out. (A
/// strategic merge keeps every field the patch does not name: without the nulls a Running
/// pod would keep its Pending message and a container both `waiting` and `running`.)
pub fn status_patch(current: Option<&PodStatus>, desired: &PodStatus) -> serde_json::Value {
    let mut patch = serde_json::to_value(desired).unwrap_or_default();
    if let Some(current) = current {
        let current = serde_json::to_value(current).unwrap_or_default();
        clear_stale(&current, &mut patch);
    }
    patch
}

/// Top-level status fields orca owns but does not always set.
const OWNED_TOP_LEVEL: [&str; 2] = ["reason", "message"];
/// Lists whose items orca owns whole, by merge key.
const OWNED_LISTS: [&str; 3] = ["conditions", "containerStatuses", "initContainerStatuses"];

fn has_stale(current: &serde_json::Value, desired: &serde_json::Value) -> bool {
    let mut patch = desired.clone();
    clear_stale(current, &mut patch);
    patch != *desired
}

/// Adds the nulls [`status_patch`] describes to `patch` (which starts as the desired status).
fn clear_stale(current: &serde_json::Value, patch: &mut serde_json::Value) {
    use serde_json::Value;
    let (Value::Object(current), Value::Object(patch)) = (current, patch) else {
        return;
    };
    for key in OWNED_TOP_LEVEL {
        if !patch.contains_key(key) && is_set(current.get(key)) {
            patch.insert(key.to_owned(), Value::Null);
        }
    }
    for list in OWNED_LISTS {
        let (Some(Value::Array(have)), Some(Value::Array(want))) =
            (current.get(list), patch.get_mut(list))
        else {
            continue;
        };
        let Some(key) = merge_key(want) else { continue };
        for wanted in want.iter_mut() {
            if let Some(had) = have.iter().find(|had| had.get(key) == wanted.get(key)) {
                clear_absent(had, wanted);
            }
        }
    }
}

/// Nulls in `wanted` for every field `had` sets that `wanted` lacks, all the way down.
fn clear_absent(had: &serde_json::Value, wanted: &mut serde_json::Value) {
    use serde_json::Value;
    let (Value::Object(had), Value::Object(wanted)) = (had, wanted) else {
        return;
    };
    for (key, value) in had {
        match wanted.get_mut(key) {
            None if is_set(Some(value)) => {
                wanted.insert(key.clone(), Value::Null);
            }
            Some(inner @ Value::Object(_)) => clear_absent(value, inner),
            _ => {}
        }
    }
}

/// A value worth clearing: not absent, null, or an empty object (the apiserver's default for
/// some fields, e.g. a container's `lastState`).
fn is_set(value: Option<&serde_json::Value>) -> bool {
    match value {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Object(map)) => !map.is_empty(),
        Some(_) => true,
    }
}

fn covers(current: &serde_json::Value, desired: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => {
            desired.iter().all(|(key, wanted)| match current.get(key) {
                Some(have) => covers(have, wanted),
                None => wanted.is_null(),
            })
        }
        (Value::Array(current), Value::Array(desired)) => match merge_key(desired) {
            Some(key) => desired.iter().all(|wanted| {
                current
                    .iter()
                    .find(|have| have.get(key) == wanted.get(key))
                    .is_some_and(|have| covers(have, wanted))
            }),
            None => current == desired,
        },
        (current, desired) => current == desired,
    }
}

fn merge_key(items: &[serde_json::Value]) -> Option<&'static str> {
    let first = items.first()?.as_object()?;
    ["type", "name", "ip"]
        .into_iter()
        .find(|key| first.contains_key(*key))
}
