//! The shared libraries an executable loads, as the build machine's dynamic loader resolves
//! them (`ldd`): the ELF interpreter and each `NEEDED` library, transitively. distroless/cc
//! ships these from Debian's libc6 and libgcc-s1; here they come from the machine that built
//! the executable, so they are the very ones it was linked against.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why an executable's libraries could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum LibrariesError {
    #[error("running ldd on {}: {source} (ldd comes with glibc's libc-bin)", .path.display())]
    LddFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ldd {}: {stderr}", .path.display())]
    LddRefused { path: PathBuf, stderr: String },
    #[error("{}: the library {library} is not found on this machine", .path.display())]
    NotFound { path: PathBuf, library: String },
}

/// Whether `bytes` are an ELF file (an executable or library for the loader).
pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// The absolute paths of the libraries and interpreter `executable` needs (none for a static
/// executable).
///
/// # Errors
/// [`LibrariesError`]: ldd cannot run, or a library is missing here.
pub fn needed_by(executable: &Path) -> Result<Vec<PathBuf>, LibrariesError> {
    let output = Command::new("ldd")
        .arg(executable)
        .output()
        .map_err(|source| LibrariesError::LddFailed {
            path: executable.to_owned(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        // glibc's ldd exits 1 for a static executable, saying so.
        if stdout.contains("statically linked") || stdout.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(LibrariesError::LddRefused {
            path: executable.to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    parse_ldd(executable, &stdout)
}

/// Each line is `name => /path (0x…)`, `/interpreter (0x…)`, `name (0x…)` (the vDSO, which the
/// kernel provides), or `name => not found`.
fn parse_ldd(executable: &Path, stdout: &str) -> Result<Vec<PathBuf>, LibrariesError> {
    let mut paths = Vec::new();
    for line in stdout.lines().map(str::trim) {
        if line.contains("statically linked") {
            continue;
        }
        let (name, resolved) = match line.split_once("=>") {
            Some((name, resolved)) => (name.trim(), resolved.trim()),
            None => (line, line),
        };
        if resolved.starts_with("not found") {
            return Err(LibrariesError::NotFound {
                path: executable.to_owned(),
                library: name.to_owned(),
            });
        }
        let path = resolved.split(" (").next().unwrap_or_default().trim();
        if path.starts_with('/') {
            paths.push(PathBuf::from(path));
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_libraries_and_interpreter_but_not_the_vdso() {
        let stdout = "\tlinux-vdso.so.1 (0x00007ffc)\n\
            \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f52)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f51)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f52)\n";
        let paths = parse_ldd(Path::new("orca"), stdout).unwrap();
        assert_eq!(
            paths,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }

    #[test]
    fn a_library_missing_here_is_named() {
        let error = parse_ldd(Path::new("orca"), "\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(error.to_string().contains("libfoo.so.1"), "{error}");
    }

    #[test]
    fn this_test_executable_needs_at_least_libc_and_an_interpreter() {
        let exe = std::env::current_exe().unwrap();
        let paths = needed_by(&exe).unwrap();
        assert!(
            paths
                .iter()
                .any(|p| p.to_string_lossy().contains("libc.so")),
            "{paths:?}"
        );
        assert!(
            paths
                .iter()
                .any(|p| p.to_string_lossy().contains("ld-linux")),
            "{paths:?}"
        );
    }
}
