//! The kubelet HTTPS API that the apiserver calls for logs: its TLS, authentication and routes.

pub mod tls;
