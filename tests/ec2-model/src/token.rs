//! Client tokens, remembered as EC2 documents: a token whose launch succeeded
//! names that instance for at least 24 hours after it terminates (the model
//! remembers it for ever). Lookups are not subject to the visibility lag:
//! EC2 resolves its own tokens, which is what makes a retry safe.

use std::collections::BTreeMap;

use crate::launch::RunInstances;

/// What a token says about a new request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Never used by a successful launch.
    Unused,
    /// Used by a launch with the same parameters, which made this instance.
    Same(String),
    /// Used by a launch with other parameters.
    Mismatch,
}

#[derive(Clone, Debug)]
struct Remembered {
    instance_id: String,
    request: RunInstances,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct TokenBook {
    by_token: BTreeMap<String, Remembered>,
}

impl TokenBook {
    pub fn lookup(&self, token: &str, request: &RunInstances) -> Lookup {
        match self.by_token.get(token) {
            None => Lookup::Unused,
            Some(remembered) if remembered.request.same_parameters(request) => {
                Lookup::Same(remembered.instance_id.clone())
            }
            Some(_) => Lookup::Mismatch,
        }
    }

    /// Records that `token`'s launch succeeded and made `instance_id`. Only
    /// successful launches are remembered: a failed one leaves the token free.
    pub fn remember(&mut self, token: &str, instance_id: &str, request: &RunInstances) {
        self.by_token
            .entry(token.to_owned())
            .or_insert_with(|| Remembered {
                instance_id: instance_id.to_owned(),
                request: request.clone(),
            });
    }
}
