//! The hooks' chains as the pipeline runs them: each step's plugin, settings (serialized
//! once) and `onError`.

use crate::config::{OnError, PluginStep, PolicyConfig};

/// One plugin in a hook's chain, settings already serialized.
#[derive(Debug, Clone)]
pub struct ChainStep {
    pub plugin: String,
    pub settings: String,
    pub on_error: OnError,
}

impl From<&PluginStep> for ChainStep {
    fn from(step: &PluginStep) -> ChainStep {
        ChainStep {
            plugin: step.plugin.clone(),
            settings: step.settings.to_string(),
            on_error: step.on_error,
        }
    }
}

/// The three chains.
#[derive(Debug, Clone)]
pub struct HookChains {
    pub select_instance: Vec<ChainStep>,
    pub choose_market: Vec<ChainStep>,
    pub build_tags: Vec<ChainStep>,
}

impl HookChains {
    pub fn from_config(policy: &PolicyConfig) -> HookChains {
        let chain = |steps: &[PluginStep]| steps.iter().map(ChainStep::from).collect();
        HookChains {
            select_instance: chain(&policy.select_instance),
            choose_market: chain(&policy.choose_market),
            build_tags: chain(&policy.build_tags),
        }
    }

    /// One plugin per hook, default settings, failures fatal: `orca plugin eval` and benches.
    pub fn single(select: &str, market: &str, tags: &str) -> HookChains {
        let step = |plugin: &str| {
            vec![ChainStep {
                plugin: plugin.to_owned(),
                settings: "{}".to_owned(),
                on_error: OnError::FAIL,
            }]
        };
        HookChains {
            select_instance: step(select),
            choose_market: step(market),
            build_tags: step(tags),
        }
    }
}
