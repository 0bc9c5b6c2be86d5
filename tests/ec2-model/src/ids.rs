//! Instance ids, fleet ids and private addresses.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// True for `i-` followed by 8 or 17 lowercase hex digits, the two forms of
/// instance id EC2 accepts.
pub(crate) fn is_well_formed(id: &str) -> bool {
    id.strip_prefix("i-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A fresh `i-` + 17 hex digit id, drawn from the RNG, that `taken` refuses.
pub(crate) fn new_instance_id(rng: &mut fastrand::Rng, taken: impl Fn(&str) -> bool) -> String {
    const SPACE: u128 = 1 << 68; // 17 hex digits
    let mut candidate = rng.u128(0..SPACE);
    // Collisions are astronomically rare; walking on from the drawn value
    // keeps the result deterministic without an unbounded loop.
    for _ in 0..1_000 {
        let id = format!("i-{candidate:017x}");
        if !taken(&id) {
            return id;
        }
        candidate = (candidate + 1) % SPACE;
    }
    format!("i-{candidate:017x}")
}

/// A fresh fleet id, `fleet-` and a UUID-like 8-4-4-4-12 lowercase hex
/// group as EC2 writes them, drawn from the RNG, that `taken` refuses.
pub(crate) fn new_fleet_id(rng: &mut fastrand::Rng, taken: impl Fn(&str) -> bool) -> String {
    let mut candidate = rng.u128(..);
    // As for instance ids: walk on from the drawn value, never loop for ever.
    for _ in 0..1_000 {
        let id = fleet_id(candidate);
        if !taken(&id) {
            return id;
        }
        candidate = candidate.wrapping_add(1);
    }
    fleet_id(candidate)
}

/// A fresh launch template id, `lt-` and 17 lowercase hex digits, drawn from the RNG, that
/// `taken` refuses.
pub(crate) fn new_launch_template_id(
    rng: &mut fastrand::Rng,
    taken: impl Fn(&str) -> bool,
) -> String {
    const SPACE: u128 = 1 << 68; // 17 hex digits
    let mut candidate = rng.u128(0..SPACE);
    // As for instance ids: walk on from the drawn value, never loop for ever.
    for _ in 0..1_000 {
        let id = format!("lt-{candidate:017x}");
        if !taken(&id) {
            return id;
        }
        candidate = (candidate + 1) % SPACE;
    }
    format!("lt-{candidate:017x}")
}

fn fleet_id(n: u128) -> String {
    let a = n >> 96;
    let b = (n >> 80) & 0xffff;
    let c = (n >> 64) & 0xffff;
    let d = (n >> 48) & 0xffff;
    let e = n & 0xffff_ffff_ffff;
    format!("fleet-{a:08x}-{b:04x}-{c:04x}-{d:04x}-{e:012x}")
}

/// A fresh address in 10.0.0.0/8 (never a network or broadcast-looking
/// `.0`/`.255` host), drawn from the RNG, not in `taken`.
pub(crate) fn new_private_ip(rng: &mut fastrand::Rng, taken: &BTreeSet<Ipv4Addr>) -> Ipv4Addr {
    let mut candidate = rng.u32(0..1 << 24);
    for _ in 0..(1 << 24) {
        let [_, b, c, d] = candidate.to_be_bytes();
        let ip = Ipv4Addr::new(10, b, c, d);
        if d != 0 && d != 255 && !taken.contains(&ip) {
            return ip;
        }
        candidate = (candidate + 1) % (1 << 24);
    }
    // Sixteen million instances in one test: give up on uniqueness.
    Ipv4Addr::new(10, 0, 0, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_eight_or_seventeen_lowercase_hex_digits_are_well_formed() {
        assert!(is_well_formed("i-1234abcd"));
        assert!(is_well_formed("i-0123456789abcdef0"));
        assert!(!is_well_formed("i-1234ABCD"));
        assert!(!is_well_formed("i-123"));
        assert!(!is_well_formed(""));
        assert!(!is_well_formed("i-"));
        assert!(!is_well_formed("x-1234abcd"));
        assert!(!is_well_formed("i-1234abcé"));
    }

    #[test]
    fn new_ids_are_well_formed_and_skip_taken_ones() {
        let mut rng = fastrand::Rng::with_seed(1);
        let first = new_instance_id(&mut rng.clone(), |_| false);
        let second = new_instance_id(&mut rng, |id| id == first);
        assert!(is_well_formed(&first));
        assert!(is_well_formed(&second));
        assert_ne!(first, second);
    }

    #[test]
    fn new_fleet_ids_look_like_ec2_fleet_ids_and_skip_taken_ones() {
        let mut rng = fastrand::Rng::with_seed(1);
        let first = new_fleet_id(&mut rng.clone(), |_| false);
        let second = new_fleet_id(&mut rng, |id| id == first);
        assert_ne!(first, second);
        for id in [first, second] {
            let groups: Vec<&str> = id.trim_start_matches("fleet-").split('-').collect();
            let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
            assert!(id.starts_with("fleet-"), "{id}");
            assert_eq!(lengths, [8, 4, 4, 4, 12], "{id}");
            assert!(groups.iter().all(|g| {
                g.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            }));
        }
        assert_eq!(
            fleet_id(u128::MAX),
            "fleet-ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
        assert_eq!(fleet_id(0), "fleet-00000000-0000-0000-0000-000000000000");
    }

    #[test]
    fn new_private_ips_are_in_ten_slash_eight_and_unique() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut taken = BTreeSet::new();
        for _ in 0..1_000 {
            let ip = new_private_ip(&mut rng, &taken);
            assert_eq!(ip.octets()[0], 10);
            assert!(taken.insert(ip));
        }
    }
}
