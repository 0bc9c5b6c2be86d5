//! A spot price history for the harness's moto, which otherwise answers one constant price for
//! every pool: a test sets the price changes of the pools it names, and
//! `DescribeSpotPriceHistory` answers them as EC2 documents (the changes in the asked window
//! and the price in effect at its start; tests/cluster/moto-server-with-client-tokens.py). The
//! harness's moto is shared by the tests running at once, so each test sets pools of its own
//! (an instance type no other test asks about, or a zone of its own) and [`SetPrices`] takes
//! them out again when dropped.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::TestCluster;

/// One price change of one pool, as the file holds it and EC2 answers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PriceChange {
    pub instance_type: String,
    pub availability_zone: String,
    /// Dollars per hour, as EC2 writes it (`"0.0350"`).
    pub spot_price: String,
    /// ISO 8601, UTC.
    pub timestamp: String,
}

impl PriceChange {
    pub fn new(instance_type: &str, zone: &str, price: &str, at: Timestamp) -> PriceChange {
        PriceChange {
            instance_type: instance_type.to_owned(),
            availability_zone: zone.to_owned(),
            spot_price: price.to_owned(),
            timestamp: at.to_string(),
        }
    }

    fn pool(&self) -> (&str, &str) {
        (&self.instance_type, &self.availability_zone)
    }
}

/// The pools a test set; dropping it takes their changes out of the file.
pub struct SetPrices {
    file: PathBuf,
    pools: Vec<(String, String)>,
}

impl SetPrices {
    /// Replaces the history of every pool `changes` name with `changes` (other pools keep
    /// theirs).
    pub fn set(cluster: &TestCluster, changes: Vec<PriceChange>) -> Result<SetPrices> {
        let file = PathBuf::from(cluster.var("ORCA_SPOT_PRICES"));
        let mut pools: Vec<(String, String)> = changes
            .iter()
            .map(|c| (c.instance_type.clone(), c.availability_zone.clone()))
            .collect();
        pools.sort();
        pools.dedup();
        edit(&file, |all| {
            all.retain(|c| !pools.iter().any(|(t, z)| c.pool() == (t, z)));
            all.extend(changes);
        })?;
        Ok(SetPrices { file, pools })
    }
}

impl Drop for SetPrices {
    fn drop(&mut self) {
        let pools = std::mem::take(&mut self.pools);
        if let Err(error) = edit(&self.file, |all| {
            all.retain(|c| !pools.iter().any(|(t, z)| c.pool() == (t, z)));
        }) {
            eprintln!("taking the set spot prices out again: {error:#}");
        }
    }
}

/// Reads the file, changes it, and writes it whole (renamed into place, so moto never reads
/// half of it), under a lock the tests running at once share.
fn edit(file: &Path, change: impl FnOnce(&mut Vec<PriceChange>)) -> Result<()> {
    let lock_path = file.with_extension("lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| lock_path.display().to_string())?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let mut all: Vec<PriceChange> = match std::fs::read_to_string(file) {
        Ok(text) if !text.trim().is_empty() => {
            serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?
        }
        Ok(_) => Vec::new(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error).with_context(|| file.display().to_string()),
    };
    change(&mut all);
    let staged = file.with_extension("json.new");
    let mut out = File::create(&staged).with_context(|| staged.display().to_string())?;
    out.write_all(serde_json::to_string_pretty(&all)?.as_bytes())?;
    out.sync_all()?;
    std::fs::rename(&staged, file).with_context(|| format!("renaming into {}", file.display()))?;
    Ok(())
}
