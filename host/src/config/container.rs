//! What the container orca runs in allows it: the memory limit, read from cgroup v2, against
//! which the configuration's memory budgets are checked at startup.

use std::path::Path;

/// Where cgroup v2 shows this process's own cgroup (the container's, in a pod).
const MEMORY_MAX: &str = "/sys/fs/cgroup/memory.max";

/// The memory limit of this process's cgroup in bytes; `None` without cgroup v2 or without
/// a limit (`max`).
pub fn memory_limit() -> Option<u64> {
    read_memory_limit(Path::new(MEMORY_MAX))
}

fn read_memory_limit(path: &Path) -> Option<u64> {
    parse_memory_max(&std::fs::read_to_string(path).ok()?)
}

fn parse_memory_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_bytes_and_max_is_none() {
        assert_eq!(parse_memory_max("536870912\n"), Some(512 << 20));
        assert_eq!(parse_memory_max("max\n"), None);
        assert_eq!(parse_memory_max(""), None);
    }

    #[test]
    fn no_cgroup_file_is_no_limit() {
        assert_eq!(
            read_memory_limit(Path::new("/nonexistent/memory.max")),
            None
        );
    }
}
