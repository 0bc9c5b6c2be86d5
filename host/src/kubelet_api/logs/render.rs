//! How lines are printed, as the kubelet prints them, and `limitBytes`: the first N bytes of
//! the whole answer, follow included, then the answer ends.

use crate::provider::LogLine;

/// `text\n` per line, with `timestamps` `RFC3339 text\n`.
pub fn format(lines: &[LogLine], timestamps: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        if timestamps {
            out.extend_from_slice(line.at.to_string().as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(line.text.as_bytes());
        out.push(b'\n');
    }
    out
}

/// What `limitBytes` leaves to send; unlimited without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget(Option<u64>);

impl Budget {
    pub fn new(limit_bytes: Option<u64>) -> Budget {
        Budget(limit_bytes)
    }

    /// `chunk` cut to what is left (as the kubelet cuts, at the byte), and whether the
    /// budget is spent.
    pub fn spend(&mut self, mut chunk: Vec<u8>) -> (Vec<u8>, bool) {
        let Some(left) = self.0.as_mut() else {
            return (chunk, false);
        };
        let allowed = usize::try_from(*left).unwrap_or(usize::MAX);
        chunk.truncate(allowed);
        *left -= u64::try_from(chunk.len()).unwrap_or(*left);
        (chunk, *left == 0)
    }

    pub fn spent(&self) -> bool {
        self.0 == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;

    fn lines() -> Vec<LogLine> {
        (0..3)
            .map(|i| {
                LogLine::new(
                    Timestamp::from_second(100 + i).unwrap(),
                    format!("line {i}"),
                )
            })
            .collect()
    }

    #[test]
    fn lines_are_printed_with_or_without_their_time() {
        assert_eq!(format(&lines()[..2], false), b"line 0\nline 1\n");
        assert_eq!(
            format(&lines()[2..], true),
            b"1970-01-01T00:01:42Z line 2\n"
        );
        assert_eq!(format(&[], true), b"");
    }

    #[test]
    fn the_budget_keeps_the_first_bytes_across_chunks() {
        let mut budget = Budget::new(Some(10));
        assert_eq!(
            budget.spend(b"line 0\n".to_vec()),
            (b"line 0\n".to_vec(), false)
        );
        assert_eq!(budget.spend(b"line 1\n".to_vec()), (b"lin".to_vec(), true));
        assert!(budget.spent());
        assert_eq!(budget.spend(b"more".to_vec()), (Vec::new(), true));
        let mut unlimited = Budget::new(None);
        assert_eq!(unlimited.spend(vec![b'x'; 100]).0.len(), 100);
        assert!(!unlimited.spent());
    }
}
