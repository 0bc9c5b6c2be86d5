//! The EC2 API as a client sees it: each call is subject to throttling and
//! to the faults of the behaviour profile.

mod console_output;
mod create_tags;
mod describe;
mod describe_fleets;
mod fleet;
mod run;
mod stop;
mod templates;
mod terminate;
