//! Guardrails: the host's limits on what any plugin may choose (`policy.guardrails`), checked
//! on every plan after the chains, whatever plugins made it.
//!
//! A plan is a set of offerings: each candidate type in the chosen market, and in on-demand
//! too when a spot plan may fall back. The guardrails narrow that set rather than refuse the
//! plan when they can, because every candidate a selector returns is one it accepts for the
//! pod: what is left launches, and what was taken away is recorded on the pod. Only a plan
//! with nothing left is refused (the pod fails `GuardrailViolation`: the same pod and plugins
//! would answer the same again).
//!
//! | guardrail | a plan that breaks it |
//! |---|---|
//! | `allowInstanceTypes`, `allowFamilies` (a type matching one of either), `denyInstanceTypes`, `denyFamilies` (deny wins) | the candidate is dropped |
//! | `markets` without spot | a spot plan with an on-demand fallback launches on demand; one without is refused |
//! | `markets` without on-demand | a spot plan's on-demand fallback is dropped; an on-demand plan is refused |
//! | `maxPodPricePerHour` (and the pod's namespace cap, which no one pod may exceed either), on-demand | a candidate whose catalogue on-demand price is over the cap, or unknown, is dropped (from a spot plan's fallback too: if no candidate fits on demand, the fallback is dropped instead) |
//! | the same, spot | a max price over the cap, or none (EC2 then charges up to the on-demand price), is lowered to the cap |
//!
//! Pure: the prices come in as a function, so every rule is a table test.

pub mod catalogue;
mod glob;
mod price;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use glob::{Glob, GlobError, GlobKind};
pub use price::{Price, PriceError};

use crate::config::GuardrailsConfig;
use crate::provider::plan::{LaunchPlan, Market, MarketDecision};

/// One guardrail, by its field under `policy.guardrails`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Guardrail {
    AllowInstanceTypes,
    DenyInstanceTypes,
    AllowFamilies,
    DenyFamilies,
    Markets,
    MaxPodPricePerHour,
    MaxNamespacePricePerHour,
}

impl Guardrail {
    /// The field's name under `policy.guardrails`.
    pub fn as_str(self) -> &'static str {
        match self {
            Guardrail::AllowInstanceTypes => "allowInstanceTypes",
            Guardrail::DenyInstanceTypes => "denyInstanceTypes",
            Guardrail::AllowFamilies => "allowFamilies",
            Guardrail::DenyFamilies => "denyFamilies",
            Guardrail::Markets => "markets",
            Guardrail::MaxPodPricePerHour => "maxPodPricePerHour",
            Guardrail::MaxNamespacePricePerHour => "maxNamespacePricePerHour",
        }
    }
}

impl fmt::Display for Guardrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy.guardrails.{}", self.as_str())
    }
}

/// What a guardrail did to a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Effect {
    /// A candidate was left out; the others launch.
    Dropped,
    /// A spot plan's fallback to on-demand was left out.
    FallbackDropped,
    /// A spot plan's max price was lowered to the cap.
    MaxPriceLowered,
    /// Spot is not allowed: the plan launches on demand, as its fallback allowed.
    MovedToOnDemand,
    /// Nothing of the plan may launch.
    Refused,
    /// The pod waits until its namespace has room for it under its cap.
    Waits,
}

/// One thing a guardrail did to a pod's plan, in its decision record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailRecord {
    pub guardrail: Guardrail,
    pub effect: Effect,
    /// The plugin whose answer it concerns, and its version.
    pub plugin: String,
    /// What the plugin chose: `p5.48xlarge`, `p5.48xlarge on-demand at $55.04/h`, `spot`.
    pub value: String,
    /// The guardrail's setting it broke: `p5.*`, `$5/h`, `on-demand`.
    pub limit: String,
}

impl GuardrailRecord {
    /// One clause for a status message or an Event.
    pub fn describe(&self) -> String {
        let GuardrailRecord {
            guardrail,
            plugin,
            value,
            limit,
            ..
        } = self;
        match self.effect {
            Effect::Dropped => {
                format!("{guardrail} ({limit}) dropped {value}, chosen by plugin {plugin}")
            }
            Effect::Refused => {
                format!("{guardrail} ({limit}) refused {value}, chosen by plugin {plugin}")
            }
            Effect::FallbackDropped => format!(
                "{guardrail} ({limit}) dropped the on-demand fallback ({value}) chosen by plugin \
                 {plugin}"
            ),
            Effect::MaxPriceLowered => format!(
                "{guardrail} ({limit}) lowered the spot max price ({value}) chosen by plugin \
                 {plugin} to {limit}"
            ),
            Effect::Waits => format!(
                "{guardrail} ({limit}) holds {value}, chosen by plugin {plugin}, until the \
                 namespace has room"
            ),
            Effect::MovedToOnDemand => format!(
                "{guardrail} ({limit}) moved the plan off {value}, chosen by plugin {plugin}, to \
                 its on-demand fallback"
            ),
        }
    }
}

/// The plugins whose answers a plan holds, as records name them (`name version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deciders {
    pub select_instance: String,
    pub choose_market: String,
}

impl Deciders {
    /// Both plugins, as a record of an on-demand price (which both chose) names them.
    fn both(&self) -> String {
        format!(
            "{} (market by {})",
            self.select_instance, self.choose_market
        )
    }
}

/// A plan the guardrails let through, maybe narrowed.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub plan: LaunchPlan,
    /// What the guardrails took away or lowered; empty when the plan passed as it was.
    pub records: Vec<GuardrailRecord>,
    /// The most an hour of the pod's instance may cost over every offering the plan may
    /// launch (see [`Guardrails::worst_price`]); `None` when the catalogue lacks a price.
    pub worst_price: Option<Price>,
}

/// Why the guardrails refused a plan, or refuse the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardrailError {
    #[error("the guardrails leave no offering of the plan to launch: {}", describe_all(.records))]
    Refused { records: Vec<GuardrailRecord> },
    #[error(
        "no instance type in the catalogue passes policy.guardrails' allow and deny lists \
         ({rules}); allow at least one type the region offers"
    )]
    NothingAllowed { rules: String },
    #[error(
        "{field} is {cap}, but the cheapest instance type the guardrails allow costs {cheapest} \
         on demand ({name}) and spot is not in policy.guardrails.markets: no pod could launch; \
         raise the cap or allow spot"
    )]
    NothingAffordable {
        field: String,
        cap: Price,
        cheapest: Price,
        name: String,
    },
}

fn describe_all(records: &[GuardrailRecord]) -> String {
    records
        .iter()
        .map(GuardrailRecord::describe)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `policy.guardrails`, ready to check plans.
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    allow_types: Vec<Glob>,
    deny_types: Vec<Glob>,
    allow_families: Vec<Glob>,
    deny_families: Vec<Glob>,
    /// Empty: both markets (only [`Guardrails::none`] leaves it empty).
    markets: Vec<Market>,
    max_pod: Option<Price>,
    max_namespace: Option<Price>,
    by_namespace: BTreeMap<String, Price>,
}

impl Guardrails {
    /// No limits: every plan passes as it is.
    pub fn none() -> Guardrails {
        Guardrails::default()
    }

    /// The guardrails of a validated configuration (an entry that does not parse, which
    /// validation prevents, is left out).
    pub fn from_config(config: &GuardrailsConfig) -> Guardrails {
        let globs = |texts: &[String], kind| {
            texts
                .iter()
                .filter_map(|text| Glob::parse(text, kind).ok())
                .collect()
        };
        Guardrails {
            allow_types: globs(&config.allow_instance_types, GlobKind::InstanceType),
            deny_types: globs(&config.deny_instance_types, GlobKind::InstanceType),
            allow_families: globs(&config.allow_families, GlobKind::Family),
            deny_families: globs(&config.deny_families, GlobKind::Family),
            markets: config.markets.clone(),
            max_pod: config
                .max_pod_price_per_hour
                .and_then(|p| Price::of(Some(p))),
            max_namespace: config
                .max_namespace_price_per_hour
                .and_then(|p| Price::of(Some(p))),
            by_namespace: config
                .max_price_per_hour_by_namespace
                .iter()
                .filter_map(|(namespace, price)| {
                    Some((namespace.clone(), Price::of(Some(*price))?))
                })
                .collect(),
        }
    }

    /// The cap on `namespace`'s live instances together, if it has one.
    pub fn namespace_cap(&self, namespace: &str) -> Option<Price> {
        self.by_namespace
            .get(namespace)
            .copied()
            .or(self.max_namespace)
    }

    /// Whether `namespace` has a cap of its own (`maxPricePerHourByNamespace`).
    pub fn has_own_cap(&self, namespace: &str) -> bool {
        self.by_namespace.contains_key(namespace)
    }

    /// Whether any namespace has a cap.
    pub fn caps_namespaces(&self) -> bool {
        self.max_namespace.is_some() || !self.by_namespace.is_empty()
    }

    fn allows_market(&self, market: Market) -> bool {
        self.markets.is_empty() || self.markets.contains(&market)
    }

    fn markets_text(&self) -> String {
        if self.markets.is_empty() {
            return "spot, on-demand".to_owned();
        }
        self.markets
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The allow and deny lists' verdict on one type: `None` when it passes, else the
    /// guardrail it breaks and that guardrail's setting.
    pub fn type_breach(&self, name: &str) -> Option<(Guardrail, String)> {
        let family = name.split_once('.').map_or(name, |(family, _)| family);
        if let Some(glob) = self.deny_types.iter().find(|g| g.matches(name)) {
            return Some((Guardrail::DenyInstanceTypes, glob.to_string()));
        }
        if let Some(glob) = self.deny_families.iter().find(|g| g.matches(family)) {
            return Some((Guardrail::DenyFamilies, glob.to_string()));
        }
        let listed = !self.allow_types.is_empty() || !self.allow_families.is_empty();
        let allowed = self.allow_types.iter().any(|g| g.matches(name))
            || self.allow_families.iter().any(|g| g.matches(family));
        if listed && !allowed {
            let guardrail = if self.allow_types.is_empty() {
                Guardrail::AllowFamilies
            } else {
                Guardrail::AllowInstanceTypes
            };
            return Some((guardrail, self.allow_lists_text()));
        }
        None
    }

    fn allow_lists_text(&self) -> String {
        let list = |globs: &[Glob]| {
            globs
                .iter()
                .map(Glob::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (self.allow_types.is_empty(), self.allow_families.is_empty()) {
            (false, true) => list(&self.allow_types),
            (true, false) => list(&self.allow_families),
            _ => format!(
                "{}; allowFamilies {}",
                list(&self.allow_types),
                list(&self.allow_families)
            ),
        }
    }

    /// The first step, right after the instance chain: the candidates the allow and deny
    /// lists keep (their indices) and a record of each dropped one. When none is kept, every
    /// index is answered and nothing recorded: the plan is then refused as a whole, after the
    /// other hooks answered, so its record is complete.
    pub fn screen_types(&self, names: &[&str], plugin: &str) -> (Vec<usize>, Vec<GuardrailRecord>) {
        let mut kept = Vec::new();
        let mut records = Vec::new();
        for (index, name) in names.iter().enumerate() {
            match self.type_breach(name) {
                None => kept.push(index),
                Some((guardrail, limit)) => records.push(GuardrailRecord {
                    guardrail,
                    effect: Effect::Dropped,
                    plugin: plugin.to_owned(),
                    value: (*name).to_owned(),
                    limit,
                }),
            }
        }
        if kept.is_empty() {
            return ((0..names.len()).collect(), Vec::new());
        }
        (kept, records)
    }

    /// The cap on one pod of `namespace`: `maxPodPricePerHour`, or the namespace's cap where
    /// that is lower (no one pod may cost more than its whole namespace may).
    pub fn pod_cap(&self, namespace: &str) -> Option<(Price, Guardrail, String)> {
        let pod = self
            .max_pod
            .map(|cap| (cap, Guardrail::MaxPodPricePerHour, cap.to_string()));
        let namespace_cap = self.namespace_cap(namespace).map(|cap| {
            (
                cap,
                Guardrail::MaxNamespacePricePerHour,
                format!("{cap} for namespace {namespace}"),
            )
        });
        match (pod, namespace_cap) {
            (Some(pod), Some(ns)) if ns.0 < pod.0 => Some(ns),
            (Some(pod), _) => Some(pod),
            (None, ns) => ns,
        }
    }

    /// The whole plan, after every chain: the offerings it may launch narrowed to what the
    /// guardrails allow (see the module's table), or refused when none is left.
    /// `on_demand_price` answers the catalogue's on-demand price of a type.
    ///
    /// # Errors
    /// [`GuardrailError::Refused`] naming each guardrail, plugin and value that left nothing.
    pub fn guard(
        &self,
        plan: &LaunchPlan,
        namespace: &str,
        deciders: &Deciders,
        on_demand_price: &dyn Fn(&str) -> Option<Price>,
    ) -> Result<Guarded, GuardrailError> {
        let mut plan = plan.clone();
        let mut records = Vec::new();
        let narrowed = self.narrow(
            &mut plan,
            namespace,
            deciders,
            on_demand_price,
            &mut records,
        );
        if narrowed.is_err() {
            return Err(refused(records));
        }
        let worst_price = Self::worst_price(&plan, on_demand_price);
        Ok(Guarded {
            plan,
            records,
            worst_price,
        })
    }

    /// The steps of [`Guardrails::guard`] in order (the lists, the markets, the pod's price
    /// cap), each narrowing `plan` and adding what it did to `records`.
    fn narrow(
        &self,
        plan: &mut LaunchPlan,
        namespace: &str,
        deciders: &Deciders,
        on_demand_price: &dyn Fn(&str) -> Option<Price>,
        records: &mut Vec<GuardrailRecord>,
    ) -> Result<(), NothingLeft> {
        self.drop_unlisted(plan, deciders, records)?;
        self.guard_markets(&mut plan.market, deciders, records)?;
        let Some((cap, guardrail, limit)) = self.pod_cap(namespace) else {
            return Ok(());
        };
        let cap = PodCap {
            cap,
            guardrail,
            limit,
            on_demand_price,
        };
        match plan.market.market {
            Market::OnDemand => {
                cap.drop_over(plan, &deciders.both(), "on-demand", records);
                if plan.candidates.is_empty() {
                    return Err(NothingLeft);
                }
            }
            Market::Spot => {
                cap.guard_fallback(plan, deciders, records);
                cap.lower_max_price(plan, deciders, records);
            }
        }
        Ok(())
    }

    /// Drops the candidates the allow and deny lists refuse.
    fn drop_unlisted(
        &self,
        plan: &mut LaunchPlan,
        deciders: &Deciders,
        records: &mut Vec<GuardrailRecord>,
    ) -> Result<(), NothingLeft> {
        plan.candidates.retain(
            |candidate| match self.type_breach(&candidate.instance_type) {
                None => true,
                Some((guardrail, limit)) => {
                    records.push(record(
                        guardrail,
                        Effect::Dropped,
                        &deciders.select_instance,
                        candidate.instance_type.clone(),
                        limit,
                    ));
                    false
                }
            },
        );
        if plan.candidates.is_empty() {
            return Err(NothingLeft);
        }
        Ok(())
    }

    /// Moves a plan off a market `markets` leaves out (a spot plan to its on-demand fallback),
    /// and drops a spot plan's on-demand fallback when on-demand is left out.
    fn guard_markets(
        &self,
        market: &mut MarketDecision,
        deciders: &Deciders,
        records: &mut Vec<GuardrailRecord>,
    ) -> Result<(), NothingLeft> {
        if !self.allows_market(market.market) {
            let fallback = market.market == Market::Spot
                && market.fallback_to_on_demand
                && self.allows_market(Market::OnDemand);
            let effect = if fallback {
                Effect::MovedToOnDemand
            } else {
                Effect::Refused
            };
            records.push(record(
                Guardrail::Markets,
                effect,
                &deciders.choose_market,
                market.market.as_str().to_owned(),
                self.markets_text(),
            ));
            if !fallback {
                return Err(NothingLeft);
            }
            market.market = Market::OnDemand;
            market.max_price = None;
            market.fallback_to_on_demand = false;
            // A spot strategy means nothing on demand: the node's on-demand strategy applies,
            // as it does to any fallback.
            market.allocation_strategy = market
                .allocation_strategy
                .filter(|strategy| strategy.allowed_for(Market::OnDemand));
        }
        if market.market == Market::Spot
            && market.fallback_to_on_demand
            && !self.allows_market(Market::OnDemand)
        {
            records.push(record(
                Guardrail::Markets,
                Effect::FallbackDropped,
                &deciders.choose_market,
                "on-demand".to_owned(),
                self.markets_text(),
            ));
            market.fallback_to_on_demand = false;
        }
        Ok(())
    }

    /// The most an hour of the pod's instance may cost, over every offering `plan` may
    /// launch: a spot one at the plan's max price, else at its type's on-demand price (EC2's
    /// default max price); an on-demand one at its type's on-demand price. `None` when the
    /// catalogue lacks a price that counts.
    pub fn worst_price(
        plan: &LaunchPlan,
        on_demand_price: &dyn Fn(&str) -> Option<Price>,
    ) -> Option<Price> {
        let max_price = Price::of(plan.market.max_price);
        let mut worst = Price::ZERO;
        for offering in crate::provider::offerings(plan) {
            let price = match (offering.market, max_price) {
                (Market::Spot, Some(max_price)) => max_price,
                _ => on_demand_price(&offering.instance_type)?,
            };
            worst = worst.max(price);
        }
        Some(worst)
    }

    /// Checks the guardrails against the catalogue (`(name, on-demand price)` of every type)
    /// at startup: some type must pass the lists, and with on-demand alone, some allowed type
    /// must fit each cap. Answers warnings for allow or deny globs that match no type (a typo
    /// is likely, or a type the region does not offer yet).
    ///
    /// # Errors
    /// [`GuardrailError::NothingAllowed`] or [`GuardrailError::NothingAffordable`].
    pub fn check_catalogue(
        &self,
        types: &[(String, Option<Price>)],
    ) -> Result<Vec<String>, GuardrailError> {
        let mut warnings = Vec::new();
        let family = |name: &str| name.split_once('.').map_or(name, |(f, _)| f).to_owned();
        for (field, globs, kind) in [
            (
                "allowInstanceTypes",
                &self.allow_types,
                GlobKind::InstanceType,
            ),
            (
                "denyInstanceTypes",
                &self.deny_types,
                GlobKind::InstanceType,
            ),
            ("allowFamilies", &self.allow_families, GlobKind::Family),
            ("denyFamilies", &self.deny_families, GlobKind::Family),
        ] {
            for glob in globs {
                let matched = types.iter().any(|(name, _)| match kind {
                    GlobKind::InstanceType => glob.matches(name),
                    GlobKind::Family => glob.matches(&family(name)),
                });
                if !matched {
                    warnings.push(format!(
                        "policy.guardrails.{field}: {glob} matches no instance type in the \
                         catalogue"
                    ));
                }
            }
        }
        let allowed: Vec<&(String, Option<Price>)> = types
            .iter()
            .filter(|(name, _)| self.type_breach(name).is_none())
            .collect();
        if allowed.is_empty() {
            return Err(GuardrailError::NothingAllowed {
                rules: self.rules_text(),
            });
        }
        if self.allows_market(Market::Spot) {
            return Ok(warnings);
        }
        let cheapest = allowed
            .iter()
            .filter_map(|(name, price)| Some((price.as_ref()?, name)))
            .min();
        let Some((&cheapest, name)) = cheapest else {
            return Ok(warnings);
        };
        let caps = self
            .max_pod
            .map(|cap| ("policy.guardrails.maxPodPricePerHour".to_owned(), cap))
            .into_iter()
            .chain(
                self.max_namespace
                    .map(|cap| ("policy.guardrails.maxNamespacePricePerHour".to_owned(), cap)),
            )
            .chain(self.by_namespace.iter().map(|(namespace, cap)| {
                (
                    format!("policy.guardrails.maxPricePerHourByNamespace.{namespace}"),
                    *cap,
                )
            }));
        for (field, cap) in caps {
            if cap < cheapest {
                return Err(GuardrailError::NothingAffordable {
                    field,
                    cap,
                    cheapest,
                    name: (*name).clone(),
                });
            }
        }
        Ok(warnings)
    }

    fn rules_text(&self) -> String {
        let list = |field: &str, globs: &[Glob]| {
            (!globs.is_empty()).then(|| {
                format!(
                    "{field} [{}]",
                    globs
                        .iter()
                        .map(Glob::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        };
        [
            list("allowInstanceTypes", &self.allow_types),
            list("allowFamilies", &self.allow_families),
            list("denyInstanceTypes", &self.deny_types),
            list("denyFamilies", &self.deny_families),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// Nothing of a plan is left to launch: the guardrails refuse it.
struct NothingLeft;

/// One guardrail record.
fn record(
    guardrail: Guardrail,
    effect: Effect,
    plugin: &str,
    value: String,
    limit: String,
) -> GuardrailRecord {
    GuardrailRecord {
        guardrail,
        effect,
        plugin: plugin.to_owned(),
        value,
        limit,
    }
}

/// The refusal of a plan of which nothing is left: what was dropped on the way was refused.
fn refused(mut records: Vec<GuardrailRecord>) -> GuardrailError {
    for record in &mut records {
        if record.effect == Effect::Dropped {
            record.effect = Effect::Refused;
        }
    }
    GuardrailError::Refused { records }
}

/// The cap on one pod's price ([`Guardrails::pod_cap`]), with the catalogue's on-demand
/// prices it is checked against.
struct PodCap<'a> {
    cap: Price,
    guardrail: Guardrail,
    /// The cap as records name it.
    limit: String,
    on_demand_price: &'a dyn Fn(&str) -> Option<Price>,
}

impl PodCap<'_> {
    /// Whether `name`'s on-demand price is known and within the cap.
    fn fits(&self, name: &str) -> bool {
        (self.on_demand_price)(name).is_some_and(|price| price <= self.cap)
    }

    /// `name`, launched `how`, as a record's value: with its on-demand price.
    fn value(&self, name: &str, how: &str) -> String {
        match (self.on_demand_price)(name) {
            Some(price) => format!("{name} {how} at {price}"),
            None => format!("{name} {how}, whose price the catalogue does not know"),
        }
    }

    /// Drops the candidates that do not fit the cap on demand, chosen by `who` and launched
    /// `how`.
    fn drop_over(
        &self,
        plan: &mut LaunchPlan,
        who: &str,
        how: &str,
        records: &mut Vec<GuardrailRecord>,
    ) {
        plan.candidates.retain(|candidate| {
            let keep = self.fits(&candidate.instance_type);
            if !keep {
                records.push(record(
                    self.guardrail,
                    Effect::Dropped,
                    who,
                    self.value(&candidate.instance_type, how),
                    self.limit.clone(),
                ));
            }
            keep
        });
    }

    /// A spot plan's on-demand fallback within the cap: the candidates that do not fit it on
    /// demand dropped, or the fallback dropped when none does.
    fn guard_fallback(
        &self,
        plan: &mut LaunchPlan,
        deciders: &Deciders,
        records: &mut Vec<GuardrailRecord>,
    ) {
        if !plan.market.fallback_to_on_demand {
            return;
        }
        if plan.candidates.iter().any(|c| self.fits(&c.instance_type)) {
            self.drop_over(plan, &deciders.both(), "as on-demand fallback", records);
        } else {
            records.push(record(
                self.guardrail,
                Effect::FallbackDropped,
                &deciders.choose_market,
                "no candidate fits the cap on demand".to_owned(),
                self.limit.clone(),
            ));
            plan.market.fallback_to_on_demand = false;
        }
    }

    /// A spot plan's max price lowered to the cap when over it, or when it has none and EC2
    /// would charge up to an on-demand price over it.
    fn lower_max_price(
        &self,
        plan: &mut LaunchPlan,
        deciders: &Deciders,
        records: &mut Vec<GuardrailRecord>,
    ) {
        let over = match Price::of(plan.market.max_price) {
            Some(price) => (price > self.cap).then(|| format!("{price}")),
            // EC2's default max price is the on-demand price.
            None => plan
                .candidates
                .iter()
                .find(|c| !self.fits(&c.instance_type))
                .map(|c| {
                    format!(
                        "none: up to the on-demand price, {}",
                        self.value(&c.instance_type, "on-demand")
                    )
                }),
        };
        if let Some(value) = over {
            records.push(record(
                self.guardrail,
                Effect::MaxPriceLowered,
                &deciders.choose_market,
                value,
                self.limit.clone(),
            ));
            plan.market.max_price = Some(self.cap.usd());
        }
    }
}

#[cfg(test)]
mod tests;
