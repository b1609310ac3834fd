//! (being written)
use super::Shared;
use std::sync::Arc;

/// Starts the activity generator.
pub fn spawn(_shared: Arc<Shared>) {}
