//! Plain HTTP(S) requests from the tests, with the real `curl`.

use std::process::Command;

use anyhow::{Context, Result};

/// `curl -s <args> <url>`: (HTTP status, body). Status 0: nothing answered (or TLS failed).
pub fn curl_status(url: &str, args: &[&str]) -> Result<(u16, String)> {
    let output = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .context("running curl")?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').context("curl printed no status")?;
    Ok((code.trim().parse()?, body.to_owned()))
}
