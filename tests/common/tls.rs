//! Certificates for TLS tests, made at test time with the `openssl` command line tool: a
//! self-signed CA and a server certificate it signs for `localhost` and `127.0.0.1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// A test CA and a server certificate; the files live as long as any clone.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate (PEM): what a client must trust (`mqtt.ca_file`).
    pub ca_cert: PathBuf,
    /// The server certificate (PEM), signed by the CA.
    pub server_cert: PathBuf,
    /// The server's private key (PEM).
    pub server_key: PathBuf,
    _dir: Arc<tempfile::TempDir>,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (the TLS tests need the openssl command line tool): {e}"));
    assert!(out.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    /// Generates a fresh CA (named `cn`) and a server certificate (P-256 keys, valid 2 days).
    pub fn generate(cn: &str) -> Pki {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        super::set_mode(d, 0o755);
        std::fs::write(
            d.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write server.ext");
        let subject = format!("/CN={cn}");
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                &subject,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        );
        for f in ["ca.crt", "server.crt", "server.key"] {
            super::set_mode(&d.join(f), 0o644);
        }
        Pki {
            ca_cert: d.join("ca.crt"),
            server_cert: d.join("server.crt"),
            server_key: d.join("server.key"),
            _dir: Arc::new(dir),
        }
    }
}
