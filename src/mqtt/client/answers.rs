//! What the broker answered, in words: a failed connection as logged, with what to change when
//! the configuration can fix it (credentials, the broker's certificate), and whether an MQTT 5
//! attempt was turned down for its version (docs/brokers.md, "Protocol").

use rumqttc::ConnectionError as E3;
use rumqttc::v5::ConnectionError as E5;

/// Hint appended to a connection error the broker gave for the credentials.
const AUTH_HINT: &str = "the broker rejected the user name or password (check mqtt.username and mqtt.password)";

/// A hint for a TLS failure caused by the broker's certificate, naming what to change.
fn tls_hint(error: &rumqttc::TlsError) -> Option<&'static str> {
    use rumqttc::tokio_rustls::rustls::{CertificateError as C, Error as Rustls};
    let rustls = match error {
        rumqttc::TlsError::TLS(e) => Some(e),
        // tokio-rustls reports handshake failures as I/O errors wrapping the rustls error.
        rumqttc::TlsError::Io(e) => e.get_ref().and_then(|inner| inner.downcast_ref::<Rustls>()),
        _ => None,
    }?;
    let Rustls::InvalidCertificate(cert) = rustls else { return None };
    Some(match cert {
        C::UnknownIssuer | C::BadSignature => {
            "the broker's certificate is not signed by a trusted CA: set mqtt.ca_file to the CA certificate (PEM) that signed it"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "the broker's certificate does not name the host in mqtt.url (use the name or address it was issued for)"
        }
        C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. } => {
            "the broker's certificate is expired or not yet valid (check the broker's certificate and this host's clock)"
        }
        _ => "the broker's certificate was refused (check mqtt.ca_file and the broker's certificate)",
    })
}

/// A connection error as logged: rumqttc's text plus, for failures fixed in the configuration
/// (rejected credentials, an untrusted certificate), what to change.
pub(super) fn describe_v3(error: &rumqttc::ConnectionError) -> String {
    use rumqttc::{ConnectReturnCode as Code, ConnectionError as E};
    let hint = match error {
        E::ConnectionRefused(Code::BadUserNamePassword | Code::NotAuthorized) => Some(AUTH_HINT),
        E::Tls(tls) => tls_hint(tls),
        _ => None,
    };
    match hint {
        Some(hint) => format!("{hint}: {error}"),
        None => error.to_string(),
    }
}

/// [`describe_v3`] for MQTT 5.
pub(super) fn describe_v5(error: &rumqttc::v5::ConnectionError) -> String {
    use rumqttc::v5::ConnectionError as E;
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
    let hint = match error {
        E::ConnectionRefused(Code::BadUserNamePassword | Code::NotAuthorized | Code::BadAuthenticationMethod) => {
            Some(AUTH_HINT)
        }
        E::Tls(tls) => tls_hint(tls),
        _ => None,
    };
    match hint {
        Some(hint) => format!("{hint}: {error}"),
        None => error.to_string(),
    }
}

/// Whether an I/O error means the peer hung up on an established connection.
fn hung_up(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(e.kind(), K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof | K::BrokenPipe)
}

/// What the broker answered an MQTT 5 CONNECT when the answer means "no MQTT 5 here": a
/// CONNACK refusing the version, the connection closed before a CONNACK, or bytes that are no
/// MQTT 5 CONNACK. `None` for every other failure.
pub(super) fn v5_not_spoken(error: &E5) -> Option<String> {
    use rumqttc::v5::StateError as S;
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
    match error {
        E5::ConnectionRefused(code @ (Code::RefusedProtocolVersion | Code::UnsupportedProtocolVersion)) => {
            Some(format!("CONNACK {code:?}"))
        }
        E5::MqttState(S::ConnectionAborted) => Some("connection closed before CONNACK".into()),
        E5::Io(e) | E5::MqttState(S::Io(e)) if hung_up(e) => Some("connection closed before CONNACK".into()),
        E5::MqttState(S::Deserialization(e)) => Some(format!("an answer that is not MQTT 5 ({e})")),
        E5::NotConnAck(_) => Some("a packet other than CONNACK".into()),
        _ => None,
    }
}

/// What the broker answered an MQTT 3.1.1 CONNECT that failed, in the words of
/// [`v5_not_spoken`].
pub(super) fn v3_answer(error: &E3) -> String {
    use rumqttc::StateError as S;
    match error {
        E3::MqttState(S::ConnectionAborted) => "connection closed before CONNACK".into(),
        E3::Io(e) | E3::MqttState(S::Io(e)) if hung_up(e) => "connection closed before CONNACK".into(),
        E3::MqttState(S::Deserialization(e)) => format!("an answer that is not MQTT 3.1.1 ({e})"),
        E3::NotConnAck(_) => "a packet other than CONNACK".into(),
        other => describe_v3(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_that_rule_mqtt_5_out_fall_back() {
        use rumqttc::v5::StateError as S;
        use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
        let closed = v5_not_spoken(&E5::MqttState(S::ConnectionAborted));
        assert_eq!(closed.as_deref(), Some("connection closed before CONNACK"));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(v5_not_spoken(&E5::Io(reset)).is_some());
        let version = v5_not_spoken(&E5::ConnectionRefused(Code::UnsupportedProtocolVersion));
        assert_eq!(version.as_deref(), Some("CONNACK UnsupportedProtocolVersion"));
        // Nothing listening, or a refusal of the credentials: no reason to try 3.1.1.
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(v5_not_spoken(&E5::Io(refused)), None);
        assert_eq!(v5_not_spoken(&E5::ConnectionRefused(Code::BadUserNamePassword)), None);
    }

    #[test]
    fn a_refused_login_names_the_credentials() {
        let text = describe_v3(&E3::ConnectionRefused(rumqttc::ConnectReturnCode::NotAuthorized));
        assert!(text.starts_with(AUTH_HINT), "{text}");
        assert_eq!(
            v3_answer(&E3::MqttState(rumqttc::StateError::ConnectionAborted)),
            "connection closed before CONNACK"
        );
    }

    #[test]
    fn refused_credentials_and_untrusted_certificates_say_what_to_change() {
        use rumqttc::tokio_rustls::rustls::{CertificateError, Error as Rustls};
        let refused =
            describe_v3(&rumqttc::ConnectionError::ConnectionRefused(rumqttc::ConnectReturnCode::BadUserNamePassword));
        assert!(refused.contains("mqtt.username") && refused.contains("BadUserNamePassword"), "{refused}");
        let refused = describe_v5(&rumqttc::v5::ConnectionError::ConnectionRefused(
            rumqttc::v5::mqttbytes::v5::ConnectReturnCode::NotAuthorized,
        ));
        assert!(refused.contains("mqtt.password"), "{refused}");
        let untrusted = rumqttc::TlsError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            Rustls::InvalidCertificate(CertificateError::UnknownIssuer),
        ));
        let text = describe_v3(&rumqttc::ConnectionError::Tls(untrusted));
        assert!(text.contains("mqtt.ca_file") && text.contains("UnknownIssuer"), "{text}");
        let name = rumqttc::TlsError::TLS(Rustls::InvalidCertificate(CertificateError::NotValidForName));
        assert!(describe_v5(&rumqttc::v5::ConnectionError::Tls(name)).contains("mqtt.url"));
        let other = describe_v3(&rumqttc::ConnectionError::NetworkTimeout);
        assert_eq!(other, "Network timeout");
    }
}
