//! How orca reaches its cluster: finding the apiserver and its credentials
//! ([`connection`]), the HTTP client it talks to the apiserver with ([`http`]), and what it
//! knows of that apiserver's release and schema, so it writes only fields the server knows
//! ([`apiserver`]).

pub mod apiserver;
pub mod connection;
pub mod http;
