//! (being written)
use super::Shared;
use axum::Router;
use std::sync::Arc;

/// Routes of this interface.
pub fn router() -> Router<Arc<Shared>> {
    Router::new()
}
