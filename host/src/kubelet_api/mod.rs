//! orca's kubelet HTTPS API: who may call it and, in time, what it serves.
pub mod auth;
