//! The resources opstatus publishes, one module each.

pub mod configmap;
