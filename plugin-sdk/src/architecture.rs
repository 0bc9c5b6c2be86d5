//! CPU architectures by the names Kubernetes and users know them (`kubernetes.io/arch`), for
//! messages: the generated enum's `Debug` says `Architecture::Amd64`.

use std::fmt;

use crate::Architecture;

impl Architecture {
    /// `amd64` or `arm64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Architecture::Amd64 => "amd64",
            Architecture::Arm64 => "arm64",
        }
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_print_as_kubernetes_names_them() {
        assert_eq!(Architecture::Amd64.to_string(), "amd64");
        assert_eq!(format!("on {}", Architecture::Arm64), "on arm64");
    }
}
