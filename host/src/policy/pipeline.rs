//! The policy pipeline for one pod: each hook's plugins in configured order, every answer
//! checked host-side, the result a [`LaunchPlan`] plus the record of who decided what.
//!
//! A decision runs entirely on the plugin set current when it started, so a reload in the
//! middle never mixes versions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use orca_plugin_sdk::tags::MAX_TAGS;

use super::catalogue::any_query;
use super::catalogue::market_order::{asked_market, in_market};
use super::convert;
use super::decision::{Decision, DecisionRecord, FallbackRecord, HookRecord};
use super::explain::{AskedStep, StepFailureRecord, StepOutcome};
use super::guardrails::{Deciders, Effect, GuardrailError, GuardrailRecord, Guardrails, Price};
use super::honoured;
use super::mixed;
use super::planner::{PlanError, PlanFailure, PlanRetry, Planner};
use super::plugin_text::bounded;
use super::pod_view::pod_view_on;
use super::registry::{PluginRegistry, PluginSet, RegisteredPlugin};
use super::shadow::{self, ShadowRecord, ShadowRun, ShadowSpec};
use super::tag_merge::{self, TagConflict};
use super::validate::{self, OutputError};
use super::wasm::{
    CallError, Candidate, CatalogueQuery, Hook, InstanceQuery, PolicyError, Tag, TagContext,
};
use crate::config::{FailureKind, OnErrorAction};
use crate::provider::PodKey;
use crate::provider::ownership::ownership_tags;
use crate::provider::plan::{InstanceCandidate, LaunchPlan, Market, MarketDecision};
use crate::spend::census::TAG_SPOT_MAX_PRICE;

pub use super::chains::{ChainStep, HookChains};

/// Told about every plugin call, and of each shadow decision, for metrics.
pub trait EvaluationObserver: Send + Sync {
    fn observe(&self, plugin: &str, hook: Hook, elapsed: Duration, ok: bool);

    /// `policy.shadow`'s candidate was compared with a live decision.
    fn shadowed(&self, _record: &ShadowRecord) {}

    /// A pod the candidate was compared on launched at `launched` an hour; the candidate's
    /// offering, priced the same way, costs `candidate`.
    fn shadow_priced(&self, _plugin: &str, _candidate: Price, _launched: Price) {}
}

const ARCH_LABEL: &str = "kubernetes.io/arch";

/// Tags the provider adds to every launch beside the plan's: the cluster's id
/// (`orca.research/cluster-id`), which the plan's 50 must leave room for.
const LAUNCH_ADDED_TAGS: usize = 1;

/// Decides launch plans for pods.
pub struct Pipeline {
    registry: Arc<PluginRegistry>,
    chains: HookChains,
    node_name: String,
    cluster_name: String,
    /// The Node's `kubernetes.io/arch`, for pods that do not select one.
    node_architecture: Option<String>,
    /// The Node's zone, when it is bound to one: plugins see the pod as naming it.
    node_zone: Option<String>,
    observer: Option<Arc<dyn EvaluationObserver>>,
    /// `policy.guardrails`, checked on every plan after the chains.
    guardrails: Arc<Guardrails>,
    /// Decisions running at once (`policy.limits.concurrentCalls`): they are CPU-bound, so more
    /// than the cores only adds threads and warm sandbox memory without deciding any faster,
    /// and the bound is what keeps plugins' memory within `SandboxLimits::total_memory_bytes`.
    /// Shared by every node's pipeline ([`Pipeline::for_node`]): the bound is the process's.
    pub(super) deciding: Arc<tokio::sync::Semaphore>,
    /// `policy.shadow`: a candidate asked beside the chains for every pod, never acted on.
    shadow: Option<Arc<ShadowSpec>>,
    /// The candidate's decisions running at once (`SandboxLimits::shadow_calls`), in sandbox
    /// slots of their own; shared by every node's pipeline too.
    shadowing: Arc<tokio::sync::Semaphore>,
}

/// Why one plugin's answer was not used.
enum StepFailure {
    NotLoaded,
    NotImplemented,
    Call(CallError),
    Policy(PolicyError),
    Output(OutputError),
}

impl StepFailure {
    /// The kind `onError` decides on.
    fn kind(&self) -> FailureKind {
        match self {
            StepFailure::NotLoaded => FailureKind::NotLoaded,
            StepFailure::NotImplemented | StepFailure::Policy(PolicyError::Unsupported) => {
                FailureKind::Unsupported
            }
            StepFailure::Call(
                CallError::Timeout { .. } | CallError::Stalled { .. } | CallError::Busy { .. },
            ) => FailureKind::TimedOut,
            StepFailure::Call(CallError::Trapped { .. }) => FailureKind::Crashed,
            StepFailure::Policy(PolicyError::Declined(_)) => FailureKind::Declined,
            StepFailure::Policy(PolicyError::NoMatch(_)) => FailureKind::NoMatch,
            StepFailure::Policy(PolicyError::InvalidAnnotation(_)) => {
                FailureKind::InvalidAnnotation
            }
            StepFailure::Policy(PolicyError::InvalidSettings(_)) => FailureKind::InvalidSettings,
            StepFailure::Policy(PolicyError::Failed(_)) => FailureKind::Failed,
            StepFailure::Output(_) => FailureKind::InvalidAnswer,
        }
    }
}

/// The steps a decision asked, kept only when someone will read them (`orca plugin eval`):
/// a node's decisions skip building them.
struct Asked {
    keep: bool,
    steps: Vec<AskedStep>,
}

impl Asked {
    fn push(&mut self, step: impl FnOnce() -> AskedStep) {
        if self.keep {
            self.steps.push(step());
        }
    }
}

impl Pipeline {
    pub fn new(
        registry: Arc<PluginRegistry>,
        chains: HookChains,
        node_name: &str,
        cluster_name: &str,
    ) -> Pipeline {
        let concurrent_calls = registry.engine().limits().concurrent_calls.max(1);
        let shadow_calls = registry.engine().limits().shadow_calls.max(1);
        Pipeline {
            registry,
            chains,
            node_name: node_name.to_owned(),
            cluster_name: cluster_name.to_owned(),
            node_architecture: None,
            node_zone: None,
            observer: None,
            guardrails: Arc::new(Guardrails::none()),
            deciding: Arc::new(tokio::sync::Semaphore::new(concurrent_calls)),
            shadow: None,
            shadowing: Arc::new(tokio::sync::Semaphore::new(shadow_calls)),
        }
    }

    /// The same plugins, chains, observer and bound on concurrent decisions, deciding for
    /// another node: its name (tagged on instances), architecture and zone.
    #[must_use]
    pub fn for_node(&self, name: &str, architecture: &str, zone: Option<&str>) -> Pipeline {
        Pipeline {
            registry: self.registry.clone(),
            chains: self.chains.clone(),
            node_name: name.to_owned(),
            cluster_name: self.cluster_name.clone(),
            node_architecture: Some(architecture.to_owned()),
            node_zone: zone.map(str::to_owned),
            observer: self.observer.clone(),
            guardrails: self.guardrails.clone(),
            deciding: self.deciding.clone(),
            shadow: self.shadow.clone(),
            shadowing: self.shadowing.clone(),
        }
    }

    /// Plugins see a pod without a `kubernetes.io/arch` node selector as selecting the Node's
    /// architecture: the scheduler placed it on a Node labelled so, and its images are built
    /// for that architecture, so an instance of the other one would not run them.
    #[must_use]
    pub fn with_node_architecture(mut self, architecture: &str) -> Pipeline {
        self.node_architecture = Some(architecture.to_owned());
        self
    }

    /// Checks every plan against `guardrails` after the chains (see [`super::guardrails`]).
    #[must_use]
    pub fn with_guardrails(mut self, guardrails: Arc<Guardrails>) -> Pipeline {
        self.guardrails = guardrails;
        self
    }

    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn EvaluationObserver>) -> Pipeline {
        self.observer = Some(observer);
        self
    }

    /// Asks `shadow`'s candidate beside the chains for every pod (see [`super::shadow`]). The
    /// engine must have been built with a shadow slot (`SandboxLimits::shadow_calls`), or the
    /// candidate's calls take the live decisions' slots.
    #[must_use]
    pub fn with_shadow(mut self, shadow: Option<ShadowSpec>) -> Pipeline {
        self.shadow = shadow.map(Arc::new);
        self
    }

    /// The candidate's name, when a shadow is configured.
    pub fn shadow_plugin(&self) -> Option<&str> {
        self.shadow.as_deref().map(|spec| spec.plugin.as_str())
    }

    /// The pipeline that makes `spec`'s candidate's decisions (its chains, the same node and
    /// guardrails, no observer: the live plugins it also asks are not counted twice), with the
    /// candidate's version; `None` when no plugin of its name is loaded.
    fn candidate(&self, spec: &ShadowSpec) -> Option<(Pipeline, String)> {
        let set = self.registry.current();
        let plugin = set.get(&spec.plugin)?;
        let chains = shadow::chains(&self.chains, spec, |hook| plugin.implements(hook));
        let pipeline = Pipeline {
            registry: self.registry.clone(),
            chains,
            node_name: self.node_name.clone(),
            cluster_name: self.cluster_name.clone(),
            node_architecture: self.node_architecture.clone(),
            node_zone: self.node_zone.clone(),
            observer: None,
            guardrails: self.guardrails.clone(),
            deciding: self.shadowing.clone(),
            shadow: None,
            shadowing: self.shadowing.clone(),
        };
        Some((pipeline, plugin.plugin.version.clone()))
    }

    /// What the candidate would decide beside `live` (this pipeline's decision for `pod`), made
    /// here and now, without a budget: `orca plugin eval --shadow` and `replay`. `None` without
    /// a shadow.
    pub fn shadow_beside(
        &self,
        pod: &Pod,
        live: Result<&DecisionRecord, &PlanError>,
    ) -> Option<ShadowRecord> {
        let spec = self.shadow.as_deref()?;
        let (run, version) = match self.candidate(spec) {
            None => (ShadowRun::NotLoaded, None),
            Some((pipeline, version)) => {
                let run = match pipeline.decide(pod) {
                    Ok(decision) => ShadowRun::Decided(Box::new(decision)),
                    Err(error) => ShadowRun::Failed(error),
                };
                (run, Some(version))
            }
        };
        Some(shadow::compare(
            &spec.plugin,
            version.as_deref(),
            live,
            &run,
        ))
    }

    /// # Errors
    /// [`PlanError`] with reason `InvalidAnnotation` (a plugin rejected an annotation),
    /// `GuardrailViolation` (`policy.guardrails` left nothing of the plan to launch; the
    /// refused decision comes with it) or `PolicyError` (anything else), and a message naming
    /// the hook (or guardrail) and plugin.
    pub fn decide(&self, pod: &Pod) -> Result<Decision, PlanError> {
        let mut asked = Asked {
            keep: false,
            steps: Vec::new(),
        };
        self.decide_asking(pod, &mut asked)
    }

    /// [`Pipeline::decide`], with every plugin asked on the way and what came of it.
    pub fn explain(&self, pod: &Pod) -> (Result<Decision, PlanError>, Vec<AskedStep>) {
        let mut asked = Asked {
            keep: true,
            steps: Vec::new(),
        };
        let decision = self.decide_asking(pod, &mut asked);
        (decision, asked.steps)
    }

    /// [`Pipeline::decide`] in its steps: the pod as plugins see it, the three chains in order,
    /// the plan they make through the guardrails, and the record of it all; every step asked
    /// goes to `asked`.
    fn decide_asking(&self, pod: &Pod, asked: &mut Asked) -> Result<Decision, PlanError> {
        // Plugins' catalogue queries order by the market the pod asks for, until the market
        // is chosen, then by the chosen one.
        let market_asked = asked_market(pod);
        let (key, pod) = self.plugin_pod(pod)?;
        // The set for this whole decision, whatever reloads happen meanwhile.
        let set = self.registry.current();
        let mut run = ChainRun {
            pipeline: self,
            set: &set,
            fallbacks: Vec::new(),
            asked,
        };
        let (candidates, select_by, screened) =
            self.select_candidates(&mut run, &pod, market_asked)?;
        let (market, market_by) = self.choose_market(&mut run, &pod, &candidates, market_asked)?;
        // The guardrails clamp the type and market chains' answers before the tags are asked
        // for, so the taggers tag what will launch (the lists already screened the candidates
        // after the select-instance chain).
        let asked_plan = launch_plan(&candidates, &market, BTreeMap::new());
        let deciders = Deciders {
            select_instance: who(&select_by),
            choose_market: who(&market_by),
        };
        let GuardedPlan {
            plan,
            worst_case_price,
            records,
            refusal,
        } = self.guard_plan(asked_plan.clone(), &key.namespace, &deciders, screened);
        let (plan, merged) =
            self.tag_plan(&mut run, &pod, &key, plan, &asked_plan, refusal.is_some())?;
        let MergedTags {
            tags,
            by: tags_by,
            merged_from,
            conflicts,
        } = merged;
        let review = review(
            &pod,
            &asked_plan,
            &tags,
            &conflicts,
            [&select_by, &market_by, &tags_by],
            &merged_from,
            &run.fallbacks,
        );
        let record = DecisionRecord {
            instance_type: plan.candidates[0].instance_type.clone(),
            candidates: plan
                .candidates
                .iter()
                .map(|c| c.instance_type.clone())
                .collect(),
            market: plan.market.market,
            max_price: plan.market.max_price,
            fallback_to_on_demand: plan.market.fallback_to_on_demand,
            allocation_strategy: plan.market.allocation_strategy,
            mark_on_rebalance: plan.market.mark_on_rebalance,
            tags: plan.tags.clone(),
            select_instance: select_by,
            choose_market: market_by,
            build_tags: tags_by,
            tags_merged_from: merged_from,
            tag_conflicts: conflicts,
            fallbacks: run.fallbacks,
            mixed_policies: review.mixed_policies,
            not_honoured: review.not_honoured,
            guardrails: records,
            worst_case_price_per_hour: worst_case_price.map(Price::usd),
            launch: None,
            shadow: None,
        };
        match refusal {
            Some(error) => Err(refused(error, record)),
            None => Ok(Decision { plan, record }),
        }
    }

    /// `plan` (what the guardrails left of `asked`) with the build-tags chain's tags and orca's
    /// ownership tags. The taggers are told the plan's first type and market; a `refused`
    /// plan launches nothing, and its tags are asked for what the plugins chose, so the
    /// refused record is whole.
    fn tag_plan(
        &self,
        run: &mut ChainRun<'_>,
        pod: &super::wasm::Pod,
        key: &PodKey,
        mut plan: LaunchPlan,
        asked: &LaunchPlan,
        refused: bool,
    ) -> Result<(LaunchPlan, MergedTags), PlanError> {
        let ownership = ownership_tags(&self.node_name, &self.cluster_name, key);
        let tagged = if refused { asked } else { &plan };
        let merged = self.build_tags(
            run,
            pod,
            &tagged.candidates[0].instance_type,
            tagged.market.market,
            &ownership,
        )?;
        plan.tags = merge_tags(&merged.tags, &ownership);
        let plan = if refused {
            plan
        } else {
            with_max_price_tag(plan)
        };
        Ok((plan, merged))
    }

    /// The pod as plugins see it (on the Node's zone, selecting the Node's architecture when
    /// it selects none), with its key.
    fn plugin_pod(&self, pod: &Pod) -> Result<(PodKey, super::wasm::Pod), PlanError> {
        let key = PodKey::of(pod).ok_or_else(|| PlanError {
            reason: PlanFailure::PolicyError,
            message: "pod has no name or uid".to_owned(),
            retry: PlanRetry::No,
            refused: None,
        })?;
        let mut view = pod_view_on(pod, self.node_zone.as_deref()).map_err(|error| PlanError {
            reason: PlanFailure::PolicyError,
            message: error.to_string(),
            retry: PlanRetry::No,
            refused: None,
        })?;
        if let Some(architecture) = &self.node_architecture
            && !view.node_selector.iter().any(|(key, _)| key == ARCH_LABEL)
        {
            view.node_selector
                .push((ARCH_LABEL.to_owned(), architecture.clone()));
        }
        Ok((key, convert::pod(&view)))
    }

    /// The select-instance chain's candidates, screened by the allow and deny lists, with its
    /// record and a guardrail record of each candidate the lists dropped.
    fn select_candidates(
        &self,
        run: &mut ChainRun<'_>,
        pod: &super::wasm::Pod,
        market_asked: Option<Market>,
    ) -> Result<(Vec<Candidate>, HookRecord, Vec<GuardrailRecord>), PlanError> {
        let engine = self.registry.engine().clone();
        let catalogue = in_market(self.registry.catalogue(), market_asked);
        let (candidates, select_by) = run.run_chain(
            Hook::SelectInstance,
            &self.chains.select_instance,
            |plugin, settings| plugin.select_instance(&engine, &catalogue, pod, settings),
            |plugin, candidates| validate::candidates(plugin, candidates, catalogue.as_ref()),
            |candidates| candidates[0].reason.clone(),
        )?;
        // The allow and deny lists first, so the later hooks see only candidates that may
        // launch (all of them when none may: the plan is then refused as a whole below, with
        // every hook's answer on record).
        let names: Vec<&str> = candidates
            .iter()
            .map(|c| c.instance_type.as_str())
            .collect();
        let (kept, screened) = self.guardrails.screen_types(&names, &who(&select_by));
        let candidates = if kept.len() < candidates.len() {
            kept.into_iter()
                .map(|index| candidates[index].clone())
                .collect()
        } else {
            candidates
        };
        Ok((candidates, select_by, screened))
    }

    /// The choose-market chain's answer for `candidates`, with its record.
    fn choose_market(
        &self,
        run: &mut ChainRun<'_>,
        pod: &super::wasm::Pod,
        candidates: &[Candidate],
        market_asked: Option<Market>,
    ) -> Result<(super::wasm::MarketDecision, HookRecord), PlanError> {
        let engine = self.registry.engine().clone();
        let catalogue = in_market(self.registry.catalogue(), market_asked);
        run.run_chain(
            Hook::ChooseMarket,
            &self.chains.choose_market,
            |plugin, settings| plugin.choose_market(&engine, &catalogue, pod, settings, candidates),
            validate::market,
            |decision| decision.reason.clone(),
        )
    }

    /// The build-tags chain's tags for the first candidate in `market`: every plugin of the
    /// chain that answers adds its tags, merged in chain order (`tag_merge`), each answer
    /// checked on its own and the whole checked to leave room for orca's `ownership` tags;
    /// with the record of the first plugin that answered and of the others merged in.
    fn build_tags(
        &self,
        run: &mut ChainRun<'_>,
        pod: &super::wasm::Pod,
        instance_type: &str,
        market: crate::provider::plan::Market,
        ownership: &[(&'static str, String)],
    ) -> Result<MergedTags, PlanError> {
        let engine = self.registry.engine().clone();
        let catalogue = in_market(self.registry.catalogue(), Some(market));
        let context = TagContext {
            node_name: self.node_name.clone(),
            cluster_name: self.cluster_name.clone(),
            instance_type: instance_type.to_owned(),
            market: convert::market_to_wasm(market),
        };
        let answers = run.run_merging_chain(
            Hook::BuildTags,
            &self.chains.build_tags,
            |plugin, settings| plugin.build_tags(&engine, &catalogue, pod, settings, &context),
            |plugin, tags| check_tags(plugin, tags, ownership),
        )?;
        let named: Vec<(String, Vec<Tag>)> = answers
            .iter()
            .map(|(record, tags)| (record.plugin.clone(), tags.clone()))
            .collect();
        let (tags, conflicts) = tag_merge::merge(&named);
        let by: Vec<&str> = named.iter().map(|(plugin, _)| plugin.as_str()).collect();
        check_tag_count(&by.join(", "), &tags, ownership).map_err(|error| PlanError {
            reason: PlanFailure::PolicyError,
            message: format!("{}: {error}", hook_name(Hook::BuildTags)),
            retry: PlanRetry::No,
            refused: None,
        })?;
        let mut records = answers
            .into_iter()
            .map(|(record, tags)| (record, tags.len()));
        let (mut first_record, first_count) =
            records.next().expect("run_merging_chain answers or fails");
        let merged_from: Vec<HookRecord> = records
            .map(|(mut record, count)| {
                record.reason = format!("{count} tags merged in");
                record
            })
            .collect();
        first_record.reason = if merged_from.is_empty() {
            format!("{first_count} tags; orca's ownership tags set over them")
        } else {
            format!(
                "{} tags from {} plugins ({first_count} of its own){}; orca's ownership tags set over them",
                tags.len(),
                merged_from.len() + 1,
                match conflicts.len() {
                    0 => String::new(),
                    n => format!(", {n} keys set twice: the earlier plugin's value kept"),
                }
            )
        };
        Ok(MergedTags {
            tags,
            by: first_record,
            merged_from,
            conflicts,
        })
    }

    /// `plan` through `policy.guardrails`: narrowed (a spot max price tagged for the
    /// namespaces' caps), or refused; `screened` are the records of the lists' screening of
    /// the candidates, which a refusal turns into refusals too.
    fn guard_plan(
        &self,
        plan: LaunchPlan,
        namespace: &str,
        deciders: &Deciders,
        mut screened: Vec<GuardrailRecord>,
    ) -> GuardedPlan {
        let prices = on_demand_prices(self.registry.catalogue().as_ref(), &plan);
        let on_demand_price = |name: &str| prices.get(name).copied().flatten();
        match self
            .guardrails
            .guard(&plan, namespace, deciders, &on_demand_price)
        {
            Ok(narrowed) => {
                screened.extend(narrowed.records);
                GuardedPlan {
                    plan: narrowed.plan,
                    worst_case_price: narrowed.worst_price,
                    records: screened,
                    refusal: None,
                }
            }
            Err(GuardrailError::Refused { records }) => {
                // Candidates the lists dropped before the market was asked were refused too.
                for record in &mut screened {
                    if record.effect == Effect::Dropped {
                        record.effect = Effect::Refused;
                    }
                }
                screened.extend(records.iter().cloned());
                GuardedPlan {
                    plan,
                    worst_case_price: None,
                    records: screened,
                    refusal: Some(GuardrailError::Refused { records }),
                }
            }
            // `guard` refuses plans only.
            Err(other) => GuardedPlan {
                plan,
                worst_case_price: None,
                records: screened,
                refusal: Some(other),
            },
        }
    }
}

/// What running the hooks' chains for one decision needs beside each hook's calls: the
/// pipeline (whose observer hears of every call), the plugin set the whole decision runs on,
/// and where the fallbacks taken and the steps asked are recorded.
struct ChainRun<'a> {
    pipeline: &'a Pipeline,
    set: &'a PluginSet,
    fallbacks: Vec<FallbackRecord>,
    asked: &'a mut Asked,
}

impl<'a> ChainRun<'a> {
    /// Asks each plugin of `chain` in turn until one answers acceptably. A decline, or a
    /// failure whose kind `onError` lets through, is recorded and the next plugin asked;
    /// otherwise, or after the last plugin, it becomes the pod's error.
    fn run_chain<T>(
        &mut self,
        hook: Hook,
        chain: &[ChainStep],
        call: impl Fn(&super::wasm::LoadedPlugin, &str) -> Result<Result<T, PolicyError>, CallError>,
        check: impl Fn(&str, &T) -> Result<(), OutputError>,
        reason: impl Fn(&T) -> String,
    ) -> Result<(T, HookRecord), PlanError> {
        let mut earlier: Vec<String> = Vec::new();
        for (index, step) in chain.iter().enumerate() {
            match self.ask_step(hook, step, &call, &check) {
                Ok((answer, plugin)) => {
                    let record = answered(plugin, reason(&answer));
                    return Ok((answer, record));
                }
                Err((plugin, failure)) => {
                    let more = index + 1 < chain.len();
                    self.step_failed(hook, step, plugin, &failure, more, &mut earlier)?;
                }
            }
        }
        Err(no_plugin(hook))
    }

    /// Asks every plugin of `chain` in turn and keeps each acceptable answer, with its
    /// plugin's record, in chain order. A decline, or a failure whose kind `onError` lets
    /// through, is recorded and the next plugin asked; any other failure becomes the pod's
    /// error, and so does the last plugin's when no plugin answered.
    fn run_merging_chain<T>(
        &mut self,
        hook: Hook,
        chain: &[ChainStep],
        call: impl Fn(&super::wasm::LoadedPlugin, &str) -> Result<Result<T, PolicyError>, CallError>,
        check: impl Fn(&str, &T) -> Result<(), OutputError>,
    ) -> Result<Vec<(HookRecord, T)>, PlanError> {
        let mut answers = Vec::new();
        let mut earlier: Vec<String> = Vec::new();
        for (index, step) in chain.iter().enumerate() {
            match self.ask_step(hook, step, &call, &check) {
                Ok((answer, plugin)) => answers.push((answered(plugin, String::new()), answer)),
                Err((plugin, failure)) => {
                    // Past the last plugin, an earlier answer is the chain's.
                    let more = index + 1 < chain.len() || !answers.is_empty();
                    self.step_failed(hook, step, plugin, &failure, more, &mut earlier)?;
                }
            }
        }
        if answers.is_empty() {
            return Err(no_plugin(hook));
        }
        Ok(answers)
    }

    /// Asks `step`'s plugin: its answer (recorded as asked), or the plugin (when loaded) and
    /// why it gave none.
    #[allow(clippy::type_complexity)]
    fn ask_step<T>(
        &mut self,
        hook: Hook,
        step: &ChainStep,
        call: &impl Fn(&super::wasm::LoadedPlugin, &str) -> Result<Result<T, PolicyError>, CallError>,
        check: &impl Fn(&str, &T) -> Result<(), OutputError>,
    ) -> Result<(T, &'a RegisteredPlugin), (Option<&'a RegisteredPlugin>, StepFailure)> {
        let set: &'a PluginSet = self.set;
        let plugin = set.get(&step.plugin).map(|plugin| &**plugin);
        let failure = match plugin {
            None => StepFailure::NotLoaded,
            Some(plugin) if !plugin.implements(hook) => StepFailure::NotImplemented,
            Some(plugin) => match self.pipeline.ask(plugin, hook, &step.settings, call, check) {
                Ok(answer) => {
                    self.asked
                        .push(|| asked_step(hook, step, Some(plugin), None));
                    return Ok((answer, plugin));
                }
                Err(failure) => failure,
            },
        };
        Err((plugin, failure))
    }

    /// A step that gave no answer, recorded. When `onError` passes it on and `more` (another
    /// plugin to ask, or an earlier answer to keep), the fallback is recorded, its message
    /// joins `earlier`, and the chain goes on; otherwise the pod's error.
    fn step_failed(
        &mut self,
        hook: Hook,
        step: &ChainStep,
        plugin: Option<&RegisteredPlugin>,
        failure: &StepFailure,
        more: bool,
        earlier: &mut Vec<String>,
    ) -> Result<(), PlanError> {
        let message = describe(hook, &step.plugin, plugin, failure);
        let kind = failure.kind();
        let passed_on = step.on_error.action(kind) == OnErrorAction::Fallback && more;
        self.asked.push(|| {
            let mut record = asked_step(
                hook,
                step,
                plugin,
                Some(StepFailureRecord::new(kind, &message)),
            );
            if !passed_on {
                record.outcome = StepOutcome::FailedThePod;
            }
            record
        });
        if !passed_on {
            return Err(chain_failed(kind, message, earlier));
        }
        self.fall_back(hook, step, kind, &message);
        earlier.push(message);
        Ok(())
    }

    /// Records that `step` failed with `kind` (`message`) and the next plugin is asked.
    fn fall_back(&mut self, hook: Hook, step: &ChainStep, kind: FailureKind, message: &str) {
        if kind == FailureKind::Declined {
            tracing::debug!(hook = hook_name(hook), plugin = %step.plugin, %message, "plugin declined; asking the next");
        } else {
            tracing::info!(hook = hook_name(hook), plugin = %step.plugin, kind = kind.as_str(), %message, "plugin failed; falling back to the next");
        }
        self.fallbacks.push(FallbackRecord {
            hook: hook_name(hook).to_owned(),
            plugin: step.plugin.clone(),
            kind: kind.as_str().to_owned(),
            error: message.to_owned(),
        });
    }
}

/// The pod's error when no plugin of a hook's chain could be asked.
fn no_plugin(hook: Hook) -> PlanError {
    PlanError {
        reason: PlanFailure::PolicyError,
        message: format!("{}: no plugin is configured", hook_name(hook)),
        retry: PlanRetry::No,
        refused: None,
    }
}

/// What the guardrails made of a decision's plan.
struct GuardedPlan {
    plan: LaunchPlan,
    worst_case_price: Option<Price>,
    /// Every guardrail record: the lists' screening of the candidates, then the whole plan's.
    records: Vec<GuardrailRecord>,
    /// Why nothing of the plan may launch, when nothing may.
    refusal: Option<GuardrailError>,
}

/// The record of the plugin that answered a hook, `reason` being its answer's.
fn answered(plugin: &RegisteredPlugin, reason: String) -> HookRecord {
    HookRecord {
        plugin: plugin.plugin.name.clone(),
        version: plugin.plugin.version.clone(),
        sha256: plugin.plugin.sha256.clone(),
        reason,
        signed_by: plugin.signer.as_ref().map(ToString::to_string),
    }
}

/// The pod's error when a step failed with `kind` (`message`) and no plugin is left to ask;
/// `earlier`: the failures passed on before it.
fn chain_failed(kind: FailureKind, message: String, earlier: &[String]) -> PlanError {
    let reason = match kind {
        FailureKind::InvalidAnnotation => PlanFailure::InvalidAnnotation,
        _ => PlanFailure::PolicyError,
    };
    let retry = match kind {
        FailureKind::NotLoaded => PlanRetry::WhenLoaded,
        FailureKind::TimedOut => PlanRetry::Transient,
        _ => PlanRetry::No,
    };
    let message = if earlier.is_empty() {
        message
    } else {
        format!("{message} (after: {})", earlier.join("; "))
    };
    let message = if kind == FailureKind::Declined {
        format!("no plugin took the pod: {message}")
    } else {
        message
    };
    PlanError {
        reason,
        message,
        retry,
        refused: None,
    }
}

/// Checks one plugin's build-tags answer: well-formed, none of orca's `ownership` tags, and
/// room for them and the cluster's id under EC2's limit once merged.
fn check_tags(
    plugin: &str,
    tags: &[Tag],
    ownership: &[(&'static str, String)],
) -> Result<(), OutputError> {
    validate::tags(plugin, tags)?;
    validate::reserved_tags(plugin, tags, ownership)?;
    check_tag_count(plugin, tags, ownership)
}

/// Whether `tags` (unique; `plugins` gave them) leave room under EC2's limit for orca's
/// `ownership` tags and the cluster's id the provider sets at launch
/// (`provider::ownership`), without building the merged map.
fn check_tag_count(
    plugins: &str,
    tags: &[Tag],
    ownership: &[(&'static str, String)],
) -> Result<(), OutputError> {
    let kept = tags
        .iter()
        .filter(|t| !ownership.iter().any(|(key, _)| *key == t.key))
        .count();
    let count = kept + ownership.len() + LAUNCH_ADDED_TAGS;
    if count > MAX_TAGS {
        return Err(OutputError::TooManyTags {
            plugin: plugins.to_owned(),
            count,
        });
    }
    Ok(())
}

/// The build-tags chain's answer: the tags merged, the record of the first plugin that
/// answered, of the others merged in, and the keys set twice.
struct MergedTags {
    tags: Vec<Tag>,
    by: HookRecord,
    merged_from: Vec<HookRecord>,
    conflicts: Vec<TagConflict>,
}

/// The plan the three chains' answers make.
fn launch_plan(
    candidates: &[Candidate],
    market: &super::wasm::MarketDecision,
    tags: BTreeMap<String, String>,
) -> LaunchPlan {
    LaunchPlan {
        candidates: candidates
            .iter()
            .map(|c| InstanceCandidate {
                instance_type: c.instance_type.clone(),
                reason: c.reason.clone(),
            })
            .collect(),
        market: MarketDecision {
            market: convert::market(market.market),
            max_price: market.max_price,
            fallback_to_on_demand: market.fallback_to_on_demand,
            reason: market.reason.clone(),
            allocation_strategy: market.allocation_strategy.map(convert::allocation_strategy),
            mark_on_rebalance: market.mark_on_rebalance,
        },
        tags,
    }
}

/// `plan` with its spot max price as a tag: what a spot instance may cost at most, for the
/// namespaces' caps to read back from any listing (the max price lives in the plan alone
/// otherwise), where EC2's tag limit leaves room beside the cluster's id the provider adds;
/// without it the instance counts at its on-demand price.
fn with_max_price_tag(mut plan: LaunchPlan) -> LaunchPlan {
    if plan.market.market == crate::provider::plan::Market::Spot
        && let Some(max_price) = Price::of(plan.market.max_price)
        && plan.tags.len() + LAUNCH_ADDED_TAGS < MAX_TAGS
    {
        plan.tags
            .insert(TAG_SPOT_MAX_PRICE.to_owned(), max_price.usd().to_string());
    }
    plan
}

/// The pod's error when the guardrails refused its plan, the refused decision with it.
fn refused(error: GuardrailError, record: DecisionRecord) -> PlanError {
    let message = match error {
        GuardrailError::Refused { .. } => GuardrailError::Refused {
            records: record.guardrails.clone(),
        }
        .to_string(),
        other => other.to_string(),
    };
    PlanError {
        reason: PlanFailure::GuardrailViolation,
        message,
        retry: PlanRetry::No,
        refused: Some(Box::new(record)),
    }
}

impl Pipeline {
    /// Why the chains cannot decide for any pod as the plugins stand: the first step whose
    /// plugin is not loaded (or lacks its hook) and that no loaded plugin before it covers,
    /// or `None` when every hook has a plugin to ask.
    pub fn not_ready(&self, set: &PluginSet) -> Option<String> {
        [
            (
                Hook::SelectInstance,
                "policy.selectInstance",
                &self.chains.select_instance,
            ),
            (
                Hook::ChooseMarket,
                "policy.chooseMarket",
                &self.chains.choose_market,
            ),
            (Hook::BuildTags, "policy.buildTags", &self.chains.build_tags),
        ]
        .into_iter()
        .find_map(|(hook, field, chain)| chain_not_ready(set, hook, field, chain))
    }

    fn ask<T>(
        &self,
        plugin: &RegisteredPlugin,
        hook: Hook,
        settings: &str,
        call: &impl Fn(&super::wasm::LoadedPlugin, &str) -> Result<Result<T, PolicyError>, CallError>,
        check: &impl Fn(&str, &T) -> Result<(), OutputError>,
    ) -> Result<T, StepFailure> {
        let started = Instant::now();
        let outcome = match call(&plugin.plugin, settings) {
            Err(error) => Err(StepFailure::Call(error)),
            Ok(Err(error)) => Err(StepFailure::Policy(error)),
            Ok(Ok(answer)) => match check(&plugin.plugin.name, &answer) {
                Ok(()) => Ok(answer),
                Err(error) => Err(StepFailure::Output(error)),
            },
        };
        if let Some(observer) = &self.observer {
            observer.observe(
                &plugin.plugin.name,
                hook,
                started.elapsed(),
                outcome.is_ok(),
            );
        }
        outcome
    }
}

/// A plugin as guardrail records name it: `name version`.
fn who(hook: &HookRecord) -> String {
    format!("{} {}", hook.plugin, hook.version)
}

/// The catalogue's on-demand price of each type `plan` names (offerings of unknown types or
/// prices map to `None`), in one query.
fn on_demand_prices(
    catalogue: &dyn CatalogueQuery,
    plan: &LaunchPlan,
) -> std::collections::HashMap<String, Option<Price>> {
    let names: Vec<String> = plan
        .candidates
        .iter()
        .map(|c| c.instance_type.clone())
        .collect();
    catalogue
        .query(&InstanceQuery {
            names,
            ..any_query()
        })
        .into_iter()
        .map(|t| (t.name, Price::of(t.on_demand_price)))
        .collect()
}

pub fn hook_name(hook: Hook) -> &'static str {
    match hook {
        Hook::SelectInstance => "select-instance",
        Hook::ChooseMarket => "choose-market",
        Hook::BuildTags => "build-tags",
    }
}

/// Why one hook's chain cannot decide: walking it as a decision would, the first step that can
/// only fail (its plugin not loaded, or without the hook) under `onError: fail`, or the end of
/// the chain without a plugin that can answer.
fn chain_not_ready(
    set: &PluginSet,
    hook: Hook,
    field: &str,
    chain: &[ChainStep],
) -> Option<String> {
    let mut missing = Vec::new();
    for (index, step) in chain.iter().enumerate() {
        let kind = match set.get(&step.plugin) {
            Some(plugin) if plugin.implements(hook) => return None,
            Some(_) => {
                missing.push(format!(
                    "plugin {} ({field}[{index}]) does not implement {}",
                    step.plugin,
                    hook_name(hook)
                ));
                FailureKind::Unsupported
            }
            None => {
                missing.push(format!(
                    "plugin {} ({field}[{index}]) is not loaded",
                    step.plugin
                ));
                FailureKind::NotLoaded
            }
        };
        if step.on_error.action(kind) == OnErrorAction::Fail {
            break;
        }
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// A message for the pod's status: the hook, the plugin and version, and what went wrong.
fn describe(
    hook: Hook,
    name: &str,
    plugin: Option<&RegisteredPlugin>,
    failure: &StepFailure,
) -> String {
    let who = match plugin {
        Some(p) => format!("plugin {} {}", p.plugin.name, p.plugin.version),
        None => format!("plugin {name}"),
    };
    let hook = hook_name(hook);
    match failure {
        StepFailure::NotLoaded => {
            format!("{hook}: {who} is not loaded (not embedded and not in the plugins directory)")
        }
        StepFailure::NotImplemented => format!("{hook}: {who} does not implement {hook}"),
        // The plugin lists the hook but answered `unsupported` for this pod: say what it
        // likely meant.
        StepFailure::Policy(PolicyError::Unsupported) => format!(
            "{hook}: {who} answered unsupported (to pass a pod to the next plugin, a plugin \
             answers declined)"
        ),
        // CallError and OutputError already name the plugin; a trap's text is the exception
        // the plugin's language raised, at its line (`policy::wasm::exception`), or else
        // wasmtime's account of the trap.
        StepFailure::Call(error) => format!("{hook}: {}", bounded(&error.to_string())),
        StepFailure::Output(error) => format!("{hook}: {error}"),
        StepFailure::Policy(PolicyError::Declined(why)) => {
            format!("{hook}: {who} declined: {}", bounded(why))
        }
        StepFailure::Policy(error) => format!("{hook}: {who}: {}", policy_error_message(error)),
    }
}

pub fn policy_error_message(error: &PolicyError) -> String {
    match error {
        PolicyError::InvalidAnnotation(a) => format!(
            "annotation {}={:?} is invalid; expected {}",
            bounded(&a.annotation),
            bounded(&a.value),
            bounded(&a.expected)
        ),
        PolicyError::NoMatch(message) => format!("no match: {}", bounded(message)),
        PolicyError::InvalidSettings(message) => format!("invalid settings: {}", bounded(message)),
        PolicyError::Unsupported => "the hook is not implemented".to_owned(),
        PolicyError::Failed(message) => bounded(message).into_owned(),
        PolicyError::Declined(message) => format!("declined: {}", bounded(message)),
    }
}

/// The record of one step for [`Pipeline::explain`]; answered unless `failure` says otherwise.
fn asked_step(
    hook: Hook,
    step: &ChainStep,
    plugin: Option<&RegisteredPlugin>,
    failure: Option<StepFailureRecord>,
) -> AskedStep {
    AskedStep {
        hook: hook_name(hook),
        plugin: step.plugin.clone(),
        version: plugin.map(|p| p.plugin.version.clone()),
        interface: plugin.map(|p| p.plugin.interface.as_str()),
        outcome: if failure.is_some() {
            StepOutcome::PassedOn
        } else {
            StepOutcome::Answered
        },
        failure,
    }
}

/// What the record says of the plugins' answers beside the plan: the pod's annotations they
/// did not honour, and the plugins that broke on one hook while answering another.
struct Review {
    not_honoured: Vec<honoured::NotHonoured>,
    mixed_policies: Vec<mixed::MixedPolicy>,
}

/// The [`Review`] of one decision: `asked` is the plan as the plugins answered it (before the
/// guardrails), `tags` and `conflicts` the build-tags chain's merged answer, `[select, market,
/// tags]` each hook's (first) answering plugin, `merged_from` the taggers merged in after it.
fn review(
    pod: &super::wasm::Pod,
    asked: &LaunchPlan,
    tags: &[Tag],
    conflicts: &[TagConflict],
    [select_by, market_by, tags_by]: [&HookRecord; 3],
    merged_from: &[HookRecord],
    fallbacks: &[FallbackRecord],
) -> Review {
    let plugin_tags: Vec<(String, String)> = tags
        .iter()
        .map(|t| (t.key.clone(), t.value.clone()))
        .collect();
    let not_honoured = honoured::check(
        &pod.annotations.iter().cloned().collect(),
        &honoured::Answers {
            first_type: (&asked.candidates[0].instance_type, &select_by.plugin),
            market: (
                asked.market.market,
                asked.market.max_price,
                &market_by.plugin,
            ),
            tags: (&plugin_tags, conflicts, &tags_by.plugin),
        },
    );
    let mut answered = vec![
        answered_step(Hook::SelectInstance, select_by),
        answered_step(Hook::ChooseMarket, market_by),
        answered_step(Hook::BuildTags, tags_by),
    ];
    answered.extend(
        merged_from
            .iter()
            .map(|r| answered_step(Hook::BuildTags, r)),
    );
    let passed_over: Vec<mixed::Step<'_>> = fallbacks
        .iter()
        .map(|f| mixed::Step {
            hook: &f.hook,
            plugin: &f.plugin,
            kind: &f.kind,
        })
        .collect();
    Review {
        not_honoured,
        mixed_policies: mixed::find(&answered, &passed_over),
    }
}

/// `record`'s plugin as the answer to `hook`, for [`mixed::find`].
fn answered_step(hook: Hook, record: &HookRecord) -> mixed::Step<'_> {
    mixed::Step {
        hook: hook_name(hook),
        plugin: &record.plugin,
        kind: "",
    }
}

/// Plugin tags with orca's ownership tags set over them.
fn merge_tags(tags: &[Tag], ownership: &[(&'static str, String)]) -> BTreeMap<String, String> {
    let mut merged: BTreeMap<String, String> = tags
        .iter()
        .map(|t| (t.key.clone(), t.value.clone()))
        .collect();
    for (key, value) in ownership {
        merged.insert((*key).to_owned(), value.clone());
    }
    merged
}

#[async_trait]
impl Planner for Arc<Pipeline> {
    async fn plan(&self, pod: &Pod) -> Result<Decision, PlanError> {
        // The candidate starts first, so it decides beside the live chains rather than after.
        let shadow = self.start_shadow(pod);
        let live = self.decide_live(pod).await;
        match shadow {
            None => live,
            Some(pending) => self.with_shadow_record(live, pending).await,
        }
    }

    fn launched(&self, record: &DecisionRecord) {
        let (Some(observer), Some(shadow), Some(launch)) =
            (&self.observer, &record.shadow, &record.launch)
        else {
            return;
        };
        if let (Some(candidate), Some(launched)) = (
            Price::of(shadow.price_per_hour),
            Price::of(launch.price_per_hour),
        ) {
            observer.shadow_priced(&shadow.plugin, candidate, launched);
        }
    }
}

/// The candidate's decision for one pod, under way.
enum PendingShadow {
    NotLoaded {
        plugin: String,
    },
    Running {
        spec: Arc<ShadowSpec>,
        version: String,
        decision: ShadowTask,
    },
}

/// The candidate's decision: deciding on a blocking thread, or waiting for its slot first.
enum ShadowTask {
    Started(tokio::task::JoinHandle<Result<Decision, PlanError>>),
    Queued(tokio::task::JoinHandle<Result<Result<Decision, PlanError>, tokio::task::JoinError>>),
}

impl ShadowTask {
    async fn join(&mut self) -> Result<Result<Decision, PlanError>, tokio::task::JoinError> {
        match self {
            ShadowTask::Started(decision) => decision.await,
            ShadowTask::Queued(waiting) => waiting.await.and_then(|decided| decided),
        }
    }

    /// Past the budget: a candidate still waiting for its slot is dropped; one deciding ends
    /// within its plugins' time limits, holding its slot.
    fn abort(&self) {
        match self {
            ShadowTask::Started(decision) => decision.abort(),
            ShadowTask::Queued(waiting) => waiting.abort(),
        }
    }
}

impl Pipeline {
    /// The live chains' decision for `pod`.
    async fn decide_live(self: &Arc<Self>, pod: &Pod) -> Result<Decision, PlanError> {
        // Plugin calls are CPU-bound and may run up to their time limit: off the async workers,
        // and no more at once than `policy.limits.concurrentCalls`. A plugin's time limit starts
        // with its call, so waiting for a permit does not count against it. The permit goes
        // with the call, so a caller that stops waiting does not free its slot early.
        // (The semaphore is never closed, so the permit is always there.)
        let permit = self.deciding.clone().acquire_owned().await.ok();
        let pipeline = self.clone();
        let pod = pod.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            pipeline.decide(&pod)
        })
        .await
        .unwrap_or_else(|error| Err(crashed(&error)))
    }

    /// Starts the candidate's decision for `pod` in its own slot, when a shadow is configured.
    fn start_shadow(&self, pod: &Pod) -> Option<PendingShadow> {
        let spec = self.shadow.clone()?;
        let Some((pipeline, version)) = self.candidate(&spec) else {
            return Some(PendingShadow::NotLoaded {
                plugin: spec.plugin.clone(),
            });
        };
        let pod = pod.clone();
        // A free slot (the usual case): straight onto a blocking thread, one hop fewer.
        let decision = match self.shadowing.clone().try_acquire_owned() {
            Ok(permit) => ShadowTask::Started(tokio::task::spawn_blocking(move || {
                let _permit = permit;
                pipeline.decide(&pod)
            })),
            Err(_) => {
                let slots = self.shadowing.clone();
                ShadowTask::Queued(tokio::spawn(async move {
                    let permit = slots.acquire_owned().await.ok();
                    tokio::task::spawn_blocking(move || {
                        let _permit = permit;
                        pipeline.decide(&pod)
                    })
                    .await
                }))
            }
        };
        Some(PendingShadow::Running {
            spec,
            version,
            decision,
        })
    }

    /// `live` with the candidate's record: its decision waited for at most the shadow's
    /// budget, compared, counted, and put in the live decision's record (or in a refused
    /// plan's; a pod that fails otherwise has no record, and the comparison is only counted).
    async fn with_shadow_record(
        &self,
        mut live: Result<Decision, PlanError>,
        pending: PendingShadow,
    ) -> Result<Decision, PlanError> {
        let (plugin, version, run) = match pending {
            PendingShadow::NotLoaded { plugin } => (plugin, None, ShadowRun::NotLoaded),
            PendingShadow::Running {
                spec,
                version,
                mut decision,
            } => {
                let run = match tokio::time::timeout(spec.budget, decision.join()).await {
                    Ok(Ok(Ok(decision))) => ShadowRun::Decided(Box::new(decision)),
                    Ok(Ok(Err(error))) => ShadowRun::Failed(error),
                    Ok(Err(error)) => ShadowRun::Failed(crashed(&error)),
                    Err(_) => {
                        decision.abort();
                        ShadowRun::TimedOut
                    }
                };
                (spec.plugin.clone(), Some(version), run)
            }
        };
        let record = {
            let compared = match &live {
                Ok(decision) => Ok(&decision.record),
                Err(error) => Err(error),
            };
            shadow::compare(&plugin, version.as_deref(), compared, &run)
        };
        if let Some(observer) = &self.observer {
            observer.shadowed(&record);
        }
        match &mut live {
            Ok(decision) => decision.record.shadow = Some(record),
            Err(PlanError {
                refused: Some(refused),
                ..
            }) => refused.shadow = Some(record),
            Err(error) => {
                tracing::debug!(shadow = %plugin, outcome = record.outcome.as_str(), error = %error.message, "the pod failed; the shadow was counted only");
            }
        }
        live
    }
}

/// The pod's error when a decision's blocking task died (a panic in the host).
fn crashed(error: &tokio::task::JoinError) -> PlanError {
    PlanError {
        reason: PlanFailure::PolicyError,
        message: format!("the policy pipeline crashed: {error}"),
        retry: PlanRetry::No,
        refused: None,
    }
}
