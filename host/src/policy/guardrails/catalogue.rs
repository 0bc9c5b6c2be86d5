//! `policy.guardrails` checked against the instance-type catalogue, as orca's startup and
//! `orca plugin eval`/`bench` both need them: one place, so the two never disagree.

use super::{GuardrailError, Guardrails, Price};
use crate::config::GuardrailsConfig;
use crate::policy::catalogue::{InstanceCatalogue, any_query};
use crate::policy::wasm::CatalogueQuery;

/// The guardrails `config` declares, checked against every type in `catalogue`: a guardrail
/// no type can satisfy is refused; an allow or deny glob that matches no type is answered as
/// a warning, for the caller to show.
///
/// # Errors
/// [`GuardrailError::NothingAllowed`] or [`GuardrailError::NothingAffordable`].
pub fn checked_against(
    config: &GuardrailsConfig,
    catalogue: &InstanceCatalogue,
) -> Result<(Guardrails, Vec<String>), GuardrailError> {
    let guardrails = Guardrails::from_config(config);
    let types: Vec<(String, Option<Price>)> = catalogue
        .query(&any_query())
        .into_iter()
        .map(|t| (t.name, Price::of(t.on_demand_price)))
        .collect();
    let warnings = guardrails.check_catalogue(&types)?;
    Ok((guardrails, warnings))
}
