//! How orca reaches its cluster: finding the apiserver and its credentials
//! ([`connection`]), and the HTTP client it talks to the apiserver with ([`http`]).

pub mod connection;
pub mod http;
