//! Launching through EC2 Fleet: one `CreateFleet` of type `instant` per market carries every
//! candidate type the selector ranked in every subnet (up to [`MAX_POOLS`]), and EC2 picks the
//! pool by the allocation strategy; the answer's per-pool errors go to the pod's Events.
//!
//! # Exactly one instance per pod
//! An instant fleet's `ClientToken` is used up by its first answer, even one that launched
//! nothing, so each pod has a sequence of tokens derived from its UID ([`fleet_token`]):
//! - a request whose answer was lost (no answer, a 5xx) is kept and repeated word for word
//!   with the same token, so EC2 answers it with what it did the first time;
//! - the next token is taken only after EC2 answered the current one with no instance;
//! - the instances already tagged for the pod are adopted before any request (`create`);
//! - a process that forgot where a pod's sequence stands (a restart, a takeover) walks it
//!   again from where the pod records it (see below), else from the start: a used token
//!   with the same parameters answers as it did (the instance it launched, adopted even
//!   before its tags show, or nothing, and the walk goes on);
//! - `IdempotentParameterMismatch` says the token was used by a request with other parameters
//!   that this process does not remember. That request may have launched an instance, which
//!   then carries the pod's tags. EC2 does not list instant fleets by tag (`DescribeFleets`
//!   shows one only by id), so the launch is in doubt until the instance shows up by tag and
//!   is adopted, or until `launchVisibilityGrace` has passed without it: then the request
//!   launched nothing (or its instance is gone) and the next token is taken.
//!
//! # A replay sends what was sent
//! A request is a pure function of the pod's launch request (its plan, its workload), the node's config and template
//! version: nothing this process learnt from other pods' answers goes into it (the
//! unavailable-offering cache, which a restart forgets, does not thin a fleet's pools; EC2
//! passes over a short pool within the one request anyway). And a pod carries how many of its
//! tokens EC2 answered with nothing ([`FLEET_TOKENS_SPENT_ANNOTATION`], written with the
//! status write that follows a failed launch, never in a write of its own): a restarted
//! process, or a replica taking the node over, resumes there, so it replays at most the
//! requests of the launch in flight when the other stopped, not every token the pod ever
//! used. Only a replay rebuilt from inputs that changed since (a plan the policy made
//! otherwise, a ConfigMap edited) still meets `IdempotentParameterMismatch`, and waits the
//! grace as above.

use std::ops::ControlFlow;
use std::time::Instant;

use super::api::{
    ApiError, ApiErrorKind, FleetAnswer, FleetError, FleetPool, FleetRequest, LaunchTemplateRef,
};
use super::classify::{class_of, provider_error};
use super::template::is_template_missing;
use super::token::fleet_token;
use super::{AwsProvider, Place};
use crate::provider::plan::{AllocationStrategy, LaunchPlan, Market};
use crate::provider::{
    ErrorClass, LaunchFailed, LaunchRequest, Launched, Offering, PassedOver, PodKey, ProviderError,
};

/// EC2 Fleet takes up to this many launch template overrides in one instant request here
/// (the documented limit is higher; more pools than this only dilute a ranked list).
pub(super) const MAX_POOLS: usize = 50;
/// What a pool's error in a fleet's answer means, classified as a call's error would be.
fn fleet_error_class(error: &FleetError) -> ErrorClass {
    class_of(&ApiError::service(&error.code, &error.message))
}

mod attempts;
#[cfg(test)]
mod tests;

pub use self::attempts::FLEET_TOKENS_SPENT_ANNOTATION;
pub(super) use self::attempts::FleetAttempts;
use self::attempts::{Attempt, progress, recorded_spent_tokens, resume};

/// One launch's walk through the pod's fleet tokens and markets.
struct FleetWalk {
    /// Where the pod's token sequence stands.
    attempt: Attempt,
    /// How many more rounds of the markets may replay tokens EC2 answered with nothing.
    rounds_left: u32,
    /// The plan's market, then on-demand when spot may fall back.
    markets: Vec<Market>,
    /// The market of the next request, by its place in `markets`.
    at: usize,
    /// The pools the answers so far named as failed.
    passed_over: Vec<PassedOver>,
    /// The error the pod is to show should no request launch an instance.
    last_error: Option<ProviderError>,
}

impl FleetWalk {
    /// The market of the next request: the next in order, or the first again while rounds
    /// are left; `None` when the walk is over.
    fn next_market(&mut self) -> Option<Market> {
        loop {
            if let Some(&market) = self.markets.get(self.at) {
                return Some(market);
            }
            if self.rounds_left == 0 {
                return None;
            }
            self.rounds_left -= 1;
            self.at = 0;
        }
    }
}

impl AwsProvider {
    /// Launches the pod's instance through fleets: its plan's market, then on-demand when
    /// spot may fall back.
    pub(super) async fn launch_by_fleet(
        &self,
        launch_request: &LaunchRequest,
        places: &[Place],
        image_id: &str,
        user_data: &str,
    ) -> Result<Launched, LaunchFailed> {
        let (key, plan) = (&launch_request.pod, &launch_request.plan);
        let template = self
            .template
            .ensure(self.api.as_ref())
            .await
            .map_err(ProviderError::from)?;
        let mut walk = self.start_walk(launch_request);
        while let Some(market) = walk.next_market() {
            let request = match walk.attempt.unanswered.take() {
                Some(sent) => sent,
                None => self.fleet_request(
                    key,
                    plan,
                    market,
                    places,
                    (walk.attempt.next, &template),
                    (image_id, user_data),
                ),
            };
            let flow = match self.api.create_fleet(&request).await {
                Ok(answer) => self.answered(key, &mut walk, &request, &answer).await,
                Err(error) => self.refused(key, &mut walk, request, error).await,
            };
            if let ControlFlow::Break(outcome) = flow {
                return outcome;
            }
        }
        let error = walk.last_error.take().unwrap_or_else(|| {
            ProviderError::capacity(
                "UnfulfillableCapacity",
                "EC2 Fleet launched no instance and named no pool",
            )
        });
        Err(self.stop(key, &mut walk, error, false))
    }

    /// Where this launch starts: the pod's tokens where this process or the pod's record
    /// leaves them, its markets in order, an unanswered request's market first.
    fn start_walk(&self, launch_request: &LaunchRequest) -> FleetWalk {
        let (key, plan) = (&launch_request.pod, &launch_request.plan);
        // A process that does not remember a pod older than itself may be replaying its
        // earlier tokens: a launch call went through the markets in order, so the walk goes
        // round them again while EC2 answers with nothing, a few times. (Creation times have
        // whole seconds: a pod of the same second counts as older.)
        let created = launch_request.created;
        let older = created.is_none_or(|created| created.as_second() <= self.started.as_second());
        let (attempt, rounds_left) = resume(
            self.fleets.take(&key.uid),
            recorded_spent_tokens(&launch_request.annotations),
            older,
        );
        let mut markets = vec![plan.market.market];
        if plan.market.market == Market::Spot && plan.market.fallback_to_on_demand {
            markets.push(Market::OnDemand);
        }
        // An unanswered request is repeated first, in its own market.
        let at = attempt
            .unanswered
            .as_ref()
            .and_then(|sent| markets.iter().position(|m| *m == sent.market))
            .unwrap_or(0);
        FleetWalk {
            attempt,
            rounds_left,
            markets,
            at,
            passed_over: Vec::new(),
            last_error: None,
        }
    }

    /// After EC2 refused a request as a whole: take the pod's next token (a forgotten
    /// request's token that launched nothing within the grace), or end the launch, keeping
    /// the request to repeat when EC2 may have acted or a retry may succeed.
    async fn refused(
        &self,
        key: &PodKey,
        walk: &mut FleetWalk,
        request: FleetRequest,
        error: ApiError,
    ) -> ControlFlow<Result<Launched, LaunchFailed>> {
        if error.code == "IdempotentParameterMismatch" {
            let since = *walk
                .attempt
                .mismatched_since
                .get_or_insert_with(Instant::now);
            if since.elapsed() >= self.visibility_grace {
                // No instance showed up by tag within the grace (`create` looked
                // just now): the request that used the token launched nothing.
                tracing::info!(pod = %key, token = %request.client_token, "a fleet token used by a forgotten request launched nothing visible within the grace; taking the next");
                walk.attempt.next = request.place + 1;
                walk.attempt.mismatched_since = None;
                return ControlFlow::Continue(());
            }
            let error = ProviderError::transient(
                "IdempotentParameterMismatch",
                format!(
                    "the pod's fleet token {} was used by an earlier request with \
                     other parameters (before a restart, or a plan that changed); \
                     waiting for its instance to show up by tag",
                    request.client_token
                ),
            );
            return ControlFlow::Break(Err(self.stop(key, walk, error, true)));
        }
        if is_template_missing(&error.code) {
            // Refused as a whole: nothing done, the token not used. The next launch
            // asks again with it, naming the template as it is made or found then.
            self.template.forget().await;
            let error = self.template_missing();
            return ControlFlow::Break(Err(self.stop(key, walk, error, false)));
        }
        // No answer or a server error: EC2 may have acted. Any other refusal
        // (throttling, a bad parameter) did nothing, and repeating is harmless.
        let in_doubt = error.kind == ApiErrorKind::Transport
            || error.status.is_some_and(|status| status >= 500);
        let class = class_of(&error);
        let progress = progress(&walk.attempt);
        if in_doubt || class != ErrorClass::Permanent {
            walk.attempt.unanswered = Some(request);
            self.fleets
                .keep(&key.uid, std::mem::take(&mut walk.attempt));
        }
        ControlFlow::Break(Err(LaunchFailed {
            error: provider_error(error),
            passed_over: std::mem::take(&mut walk.passed_over),
            in_doubt,
            progress,
        }))
    }

    /// After EC2 answered a request (its token is used up, whatever the answer): the pod's
    /// instance if it launched one; else the walk goes on to the next market, remembering the
    /// pools passed over and the error the pod is to show, unless the template was missing.
    async fn answered(
        &self,
        key: &PodKey,
        walk: &mut FleetWalk,
        request: &FleetRequest,
        answer: &FleetAnswer,
    ) -> ControlFlow<Result<Launched, LaunchFailed>> {
        walk.attempt.next = request.place + 1;
        walk.attempt.mismatched_since = None;
        walk.at += 1;
        walk.passed_over.extend(self.passed_over(request, answer));
        if let Some(launched) = self.launched(request, answer).await {
            return ControlFlow::Break(Ok(Launched {
                passed_over: std::mem::take(&mut walk.passed_over),
                ..launched
            }));
        }
        if answer
            .errors
            .iter()
            .any(|error| is_template_missing(&error.code))
        {
            self.template.forget().await;
            let error = self.template_missing();
            return ControlFlow::Break(Err(self.stop(key, walk, error, false)));
        }
        // The pod's error is a capacity error if any pool had one: capacity comes back,
        // so the pod is retried, even where another pool refused for good.
        walk.last_error = answer
            .errors
            .iter()
            .rev()
            .find(|error| fleet_error_class(error) == ErrorClass::Capacity)
            .or(answer.errors.last())
            .map(|error| ProviderError {
                class: fleet_error_class(error),
                code: error.code.clone(),
                message: error.message.clone(),
            })
            .or(walk.last_error.take());
        ControlFlow::Continue(())
    }

    /// Ends the launch with `error`, keeping where the pod's tokens stand for its next one.
    fn stop(
        &self,
        key: &PodKey,
        walk: &mut FleetWalk,
        error: ProviderError,
        in_doubt: bool,
    ) -> LaunchFailed {
        let attempt = std::mem::take(&mut walk.attempt);
        let progress = progress(&attempt);
        self.fleets.keep(&key.uid, attempt);
        LaunchFailed {
            error,
            passed_over: std::mem::take(&mut walk.passed_over),
            in_doubt,
            progress,
        }
    }

    fn template_missing(&self) -> ProviderError {
        ProviderError::transient(
            "LaunchTemplateMissing",
            format!(
                "EC2 does not know the node's launch template {}; it is made again for the \
                 next launch",
                self.template.name()
            ),
        )
    }

    /// The request for the pod's `n`th token in `market`: every candidate in every subnet,
    /// in rank order, from the template's exact version. Nothing this process learnt from
    /// other pods goes in, so a restarted process builds the same request again.
    fn fleet_request(
        &self,
        key: &PodKey,
        plan: &LaunchPlan,
        market: Market,
        places: &[Place],
        (n, template): (u32, &LaunchTemplateRef),
        (image_id, user_data): (&str, &str),
    ) -> FleetRequest {
        // The market plugin's strategy is for the market it chose; an on-demand fallback
        // takes the node's (the host checked the pairing when the plugin answered).
        let strategy = plan
            .market
            .allocation_strategy
            .filter(|chosen| market == plan.market.market && chosen.allowed_for(market))
            .unwrap_or_else(|| self.config.fleet.strategy_for(market));
        let pools: Vec<FleetPool> = plan
            .candidates
            .iter()
            .enumerate()
            .flat_map(|(rank, candidate)| {
                places.iter().map(move |place| FleetPool {
                    instance_type: candidate.instance_type.clone(),
                    subnet_id: place.subnet_id.clone(),
                    // A subnet names its zone; without one, the zone picks its default subnet.
                    zone: match place.subnet_id {
                        Some(_) => None,
                        None => place.zone.clone(),
                    },
                    priority: (strategy == AllocationStrategy::Prioritized).then_some(rank as f64),
                })
            })
            .take(MAX_POOLS)
            .collect();
        FleetRequest {
            client_token: fleet_token(&key.uid, n),
            place: n,
            template: template.clone(),
            market,
            allocation_strategy: strategy,
            pools,
            image_id: image_id.to_owned(),
            max_price: match market {
                Market::Spot => plan.market.max_price,
                Market::OnDemand => None,
            },
            user_data: user_data.to_owned(),
            tags: self.launch_tags(plan),
        }
    }

    /// Each pool the answer names as failed.
    fn passed_over(&self, request: &FleetRequest, answer: &FleetAnswer) -> Vec<PassedOver> {
        answer
            .errors
            .iter()
            .filter(|error| !is_template_missing(&error.code))
            .map(|error| {
                let offering = Offering {
                    instance_type: error.instance_type.clone().unwrap_or_default(),
                    market: request.market,
                };
                let place = error
                    .zone
                    .as_deref()
                    .or(error.subnet_id.as_deref())
                    .unwrap_or("the default subnet");
                PassedOver {
                    offering,
                    error: ProviderError {
                        class: fleet_error_class(error),
                        code: error.code.clone(),
                        message: format!("in {place}: {}", error.message),
                    },
                }
            })
            .collect()
    }

    /// The pod's instance from an answer. A fleet for one instance launches one; were there
    /// more, the others are terminated at once, so none is left running unseen.
    async fn launched(&self, request: &FleetRequest, answer: &FleetAnswer) -> Option<Launched> {
        let (first, extra) = answer.instances.split_first()?;
        for surplus in extra {
            tracing::error!(fleet = %answer.fleet_id, instance = %surplus.instance_id, "a fleet for one instance launched more; terminating the surplus");
            if let Err(error) = self.terminations.call(surplus.instance_id.clone()).await {
                tracing::error!(instance = %surplus.instance_id, %error, "terminating a surplus fleet instance failed; the orphan sweep will retry");
            }
        }
        let place = first
            .zone
            .as_deref()
            .or(first.subnet_id.as_deref())
            .unwrap_or("the default subnet");
        Some(Launched {
            instance_id: first.instance_id.clone(),
            offering: Offering {
                instance_type: first.instance_type.clone(),
                market: first.market,
            },
            adopted: false,
            passed_over: Vec::new(),
            // EC2 may name only the subnet; a configured subnet's zone is known.
            zone: match (&first.zone, &first.subnet_id) {
                (Some(zone), _) => Some(zone.clone()),
                (None, Some(subnet)) => self
                    .configured_subnet_zones()
                    .await
                    .ok()
                    .and_then(|zones| zones.get(subnet).cloned()),
                (None, None) => None,
            },
            chosen_by: Some(format!(
                "EC2 Fleet ({}) chose {} {} in {place} among {} pools",
                request.allocation_strategy,
                first.instance_type,
                first.market.as_str(),
                request.pools.len()
            )),
            volumes: Vec::new(),
        })
    }
}
