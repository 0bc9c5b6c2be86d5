//! `orca plugin eval --plugin FILE.wasm --pod pod.yaml [--settings JSON]`.

use crate::cli::PipelineArgs;

pub fn run(args: &PipelineArgs) -> Result<(), String> {
    let (pipeline, _) = super::pipeline(args)?;
    let pod = super::read_pod(&args.pod)?;
    let decision = pipeline
        .decide(&pod)
        .map_err(|error| format!("the pod would fail with {error}"))?;
    let json = serde_json::to_string_pretty(&decision.record)
        .map_err(|error| format!("printing the decision: {error}"))?;
    println!("{json}");
    Ok(())
}
