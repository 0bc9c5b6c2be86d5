//! Client tokens, remembered as EC2 documents: a token names what its
//! request made (the instance of a RunInstances, the fleet of a CreateFleet)
//! for at least 24 hours after that ends (the model remembers it for ever).
//! Lookups are not subject to the visibility lag: EC2 resolves its own
//! tokens, which is what makes a retry safe.
//!
//! Each call keeps its own book: a RunInstances token never names a fleet,
//! nor a CreateFleet token an instance.

use std::collections::BTreeMap;

use crate::launch::RunInstances;

/// A request that EC2's idempotency compares with the one that first used
/// its token.
pub(crate) trait Idempotent: Clone {
    /// True if `other` asks for the same thing: every parameter but the token.
    fn same_parameters(&self, other: &Self) -> bool;
}

impl Idempotent for RunInstances {
    fn same_parameters(&self, other: &RunInstances) -> bool {
        RunInstances::same_parameters(self, other)
    }
}

/// What a token says about a new request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Never used.
    Unused,
    /// Used by a request with the same parameters, which made this (an
    /// instance id or a fleet id).
    Same(String),
    /// Used by a request with other parameters.
    Mismatch,
}

#[derive(Clone, Debug)]
struct Remembered<R> {
    made: String,
    request: R,
}

#[derive(Clone, Debug)]
pub(crate) struct TokenBook<R> {
    by_token: BTreeMap<String, Remembered<R>>,
}

impl<R> Default for TokenBook<R> {
    fn default() -> TokenBook<R> {
        TokenBook {
            by_token: BTreeMap::new(),
        }
    }
}

impl<R: Idempotent> TokenBook<R> {
    pub fn lookup(&self, token: &str, request: &R) -> Lookup {
        match self.by_token.get(token) {
            None => Lookup::Unused,
            Some(remembered) if remembered.request.same_parameters(request) => {
                Lookup::Same(remembered.made.clone())
            }
            Some(_) => Lookup::Mismatch,
        }
    }

    /// Records that `token`'s request made `made`. Which requests use up
    /// their token is the caller's to say: RunInstances remembers only a
    /// successful launch (a failed one leaves the token free), CreateFleet
    /// every fleet it answered. The first request keeps the token.
    pub fn remember(&mut self, token: &str, made: &str, request: &R) {
        self.by_token
            .entry(token.to_owned())
            .or_insert_with(|| Remembered {
                made: made.to_owned(),
                request: request.clone(),
            });
    }
}
