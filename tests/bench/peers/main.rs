//! orca side by side with its peers on one node (issue 17): KWOK and virtual-kubelet's mock
//! provider, built from the Go module proxy (tests/bench/build-peers), each run in turn against
//! the same harness with the same pods, placed by the real scheduler and created by 32
//! concurrent clients. Rounds alternate between the peers; the table gives min / median / max.
//!
//!     cargo run --release -p orca-e2e --bin peers-bench -- [--rounds R] [--peers orca,kwok,…] [--nodes K] [N…]
//!
//! Defaults: 3 rounds of 1000 and 5000 pods, every peer, one node. With `--nodes K` each peer
//! process serves K nodes (orca's `nodes:`, KWOK managing K nodes) and the pods are spread over
//! them; virtual-kubelet serves one node per process, so it sits out. Each measured row is printed as it
//! completes, then the summary table in BENCHMARKS.md's form.

mod census;
mod measure;
mod peer;
mod report;

use anyhow::{Context, Result, bail};

use measure::{Measurement, measure};
use peer::{PeerBinaries, PeerKind};

struct Args {
    rounds: usize,
    peers: Vec<PeerKind>,
    nodes: usize,
    sizes: Vec<usize>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        rounds: 3,
        peers: PeerKind::ALL.to_vec(),
        nodes: 1,
        sizes: Vec::new(),
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--rounds" => {
                args.rounds = given
                    .next()
                    .context("--rounds needs a number")?
                    .parse()
                    .context("--rounds needs a number")?;
            }
            "--nodes" => {
                args.nodes = given
                    .next()
                    .context("--nodes needs a number")?
                    .parse()
                    .context("--nodes needs a number")?;
            }
            "--peers" => {
                let names = given.next().context("--peers needs a list")?;
                args.peers = names
                    .split(',')
                    .map(PeerKind::parse)
                    .collect::<Result<_>>()?;
            }
            size => args.sizes.push(
                size.parse()
                    .with_context(|| format!("{size:?} is not a pod count"))?,
            ),
        }
    }
    if args.sizes.is_empty() {
        args.sizes = vec![1000, 5000];
    }
    if args.nodes > 1 {
        args.peers.retain(|peer| *peer != PeerKind::VirtualKubelet);
    }
    if args.rounds == 0 || args.peers.is_empty() || args.nodes == 0 {
        bail!("at least one round, one peer (virtual-kubelet serves one node) and one node");
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let binaries = PeerBinaries::build()?;
    let mut measured: Vec<Measurement> = Vec::new();
    println!("{}", report::ROUND_HEADER);
    for round in 1..=args.rounds {
        for &pods in &args.sizes {
            // Alternating, so a noisy minute of the machine hurts every peer alike.
            for &peer in &args.peers {
                let measurement = measure(peer, pods, args.nodes, &binaries)
                    .await
                    .with_context(|| format!("round {round}: {peer} with {pods} pods"))?;
                println!("{}", report::round_row(round, &measurement));
                measured.push(measurement);
            }
        }
    }
    println!();
    print!("{}", report::summary(&measured));
    Ok(())
}
