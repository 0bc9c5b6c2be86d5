//! orca's container image without a container engine, the way `ko` builds Go images: the final
//! stage of `deploy/Dockerfile` read as the recipe ([`FinalStage`]), its base
//! (`gcr.io/distroless/cc-debian12:nonroot`) stood in for by the same files taken from the build
//! machine ([`base`]), every file put in gzip-compressed, reproducible OCI layers ([`Layer`]), an
//! OCI image config ([`Image`]), and the result pushed to a registry with oci-client ([`push`]).
//!
//! `deploy/build-image` runs it on a release build; `tests/e2e/image.rs` pushes the image to a
//! real registry, pulls it back, unpacks it and runs orca from it as UID 65532.

pub mod base;
pub mod dockerfile;
pub mod image;
pub mod layer;
pub mod libraries;
pub mod push;
pub mod tree;

pub use dockerfile::FinalStage;
pub use image::{Image, Sources};
pub use layer::Layer;
pub use push::{Registry, push};
