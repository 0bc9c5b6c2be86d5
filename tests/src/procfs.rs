//! A process's CPU time and memory, read from /proc: what the benchmarks report for orca, its
//! peers and the apiserver alike.

use std::process::Command;

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_second())
}

/// Peak resident set size in bytes (VmHWM).
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmHWM:")
}

/// Resident set size now, in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmRSS:")
}

/// The anonymous part of the resident set (RssAnon: heap, stacks), in bytes: what the
/// process's allocations hold, without the pages of its binary and libraries that happen to
/// be mapped in (RssFile, which depends on the page cache as much as on the process).
pub fn anon_rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "RssAnon:")
}

fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Resident anonymous memory by where it lives, from /proc/PID/smaps, in bytes: what a memory
/// figure is made of, read without attaching anything to the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnonBreakdown {
    /// glibc's main arena (`[heap]`). orca allocates through jemalloc; glibc's malloc serves
    /// only the C libraries linked in (aws-lc).
    pub heap: u64,
    /// glibc's other arenas: anonymous mappings reserved 64 MiB at a time.
    pub arenas: u64,
    /// Thread stacks: anonymous mappings right above a guard page.
    pub stacks: u64,
    /// Everything else anonymous: jemalloc's extents (most of orca's heap), large blocks glibc
    /// mapped on their own, runtime regions.
    pub other: u64,
}

pub fn anon_breakdown(pid: u32) -> Option<AnonBreakdown> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let maps = mappings(&smaps);
    let mut breakdown = AnonBreakdown::default();
    const ARENA: u64 = 64 * 1024 * 1024;
    for (index, map) in maps.iter().enumerate() {
        let after = maps
            .get(index + 1)
            .filter(|next| is_reserved(next))
            .filter(|next| next.start == map.end);
        let before = index
            .checked_sub(1)
            .and_then(|i| maps.get(i))
            .filter(|prev| is_reserved(prev))
            .filter(|prev| prev.end == map.start);
        let kind = if map.path == "[heap]" {
            &mut breakdown.heap
        } else if !map.path.is_empty() {
            continue;
        } else if after.is_some_and(|next| next.end - map.start == ARENA) {
            // An arena: 64 MiB reserved, its used part read-write, the rest not yet.
            &mut breakdown.arenas
        } else if before.is_some() {
            // A thread stack sits right above its guard page.
            &mut breakdown.stacks
        } else {
            &mut breakdown.other
        };
        *kind += map.anonymous;
    }
    Some(breakdown)
}

/// An anonymous mapping nobody may touch: an arena's reserve, or a stack's guard page.
fn is_reserved(map: &Mapping) -> bool {
    map.path.is_empty() && map.perms.starts_with("---")
}

struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    path: String,
    anonymous: u64,
}

fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut maps: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            let perms = fields.next().unwrap_or_default().to_owned();
            let path = fields.nth(3).unwrap_or_default().to_owned();
            maps.push(Mapping {
                start,
                end,
                perms,
                path,
                anonymous: 0,
            });
        } else if first == "Anonymous:"
            && let Some(map) = maps.last_mut()
        {
            let kib: u64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            map.anonymous = kib * 1024;
        }
    }
    maps
}
