//! The REST client of a bridge's cloud settings: one per API key, behind the key's quota guard.

use super::runner::CloudSettings;
use crate::cloud::CloudError;
use crate::cloud::quota::{QuotaConfig, QuotaGuard};
use crate::cloud::rest::{RestClient, RestConfig};
use std::num::NonZeroU32;
use std::sync::Arc;

impl CloudSettings {
    /// A REST client for these settings, with a fresh quota guard of their limits. Everything
    /// that talks to the service with one key shares the client it returns.
    pub fn rest_client(&self) -> Result<RestClient, CloudError> {
        let quota = Arc::new(QuotaGuard::new(&QuotaConfig {
            max_requests_per_minute: NonZeroU32::new(self.max_requests_per_minute).unwrap_or(NonZeroU32::MIN),
            max_concurrent_requests: self.max_concurrent_requests.max(1),
            ..QuotaConfig::default()
        }));
        let mut rest_config = RestConfig::new(self.base_url.clone(), self.api_key.clone());
        rest_config.key_header = self.key_header.clone();
        rest_config.session_header = self.session_header.clone();
        RestClient::new(rest_config, quota)
    }
}
