//! The certificates a TLS connection to the broker trusts: the system's bundle and
//! `mqtt.ca_file` (docs/configuration.md).

use super::ClientError;
use std::path::Path;

/// Well-known locations of the system CA bundle (what OpenSSL-based tools read too).
const SYSTEM_CA_FILES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
];

/// The PEM certificates trusted for TLS: the system bundle (`SSL_CERT_FILE` or a well-known file)
/// plus `ca_file`.
pub(super) fn trusted_pem(ca_file: Option<&Path>) -> Result<Vec<u8>, ClientError> {
    let mut pem = Vec::new();
    let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let system = env.into_iter().chain(SYSTEM_CA_FILES.iter().map(std::path::PathBuf::from));
    for path in system {
        if let Ok(bytes) = std::fs::read(&path) {
            pem.extend_from_slice(&bytes);
            pem.push(b'\n');
            break;
        }
    }
    if let Some(path) = ca_file {
        let bytes = std::fs::read(path)
            .map_err(|e| ClientError::Tls(format!("mqtt.ca_file: cannot read {}: {e}", path.display())))?;
        pem.extend_from_slice(&bytes);
    }
    if pem.is_empty() {
        return Err(ClientError::Tls("no system CA certificates found; set mqtt.ca_file".into()));
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_an_error_not_a_panic() {
        let e = trusted_pem(Some(Path::new("/nonexistent/ca.pem"))).unwrap_err();
        assert!(e.to_string().contains("mqtt.ca_file"), "{e}");
    }
}
