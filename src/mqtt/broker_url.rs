//! The broker's URL (`mqtt.url`, docs/configuration.md): where to connect, the credentials it may
//! carry, and the text shown in messages and logs, which never holds them.

/// Host, port and whether TLS is wanted, from `mqtt://host[:port]` / `mqtts://host[:port]`.
pub fn broker_address(url: &str) -> Option<(String, u16, bool)> {
    let parsed = url::Url::parse(url).ok()?;
    let tls = match parsed.scheme() {
        "mqtt" | "tcp" => false,
        "mqtts" | "ssl" => true,
        _ => return None,
    };
    let host = parsed.host_str().filter(|h| !h.is_empty())?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    Some((host, parsed.port().unwrap_or(if tls { 8883 } else { 1883 }), tls))
}

/// The URL without any `user:password@` part, for messages and logs.
/// Everything up to the last `@` is dropped: a password may hold an unencoded `/` or `:` that
/// would end the authority early if the URL were split at its first `/`.
pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", rest.rsplit_once('@').map_or(rest, |(_, h)| h)),
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_string(),
    }
}

/// User name and password given in the URL (`mqtt://user:pass@host`), percent-decoded.
pub(crate) fn url_credentials(url: &str) -> Option<(String, String)> {
    let parsed = url::Url::parse(url).ok()?;
    if parsed.username().is_empty() {
        return None;
    }
    Some((percent_decode(parsed.username()), percent_decode(parsed.password().unwrap_or_default())))
}

/// Percent-decoding of URL user info. Written here rather than taken from the `percent-encoding`
/// crate: a new direct dependency changes every symbol name of this crate, and with them the
/// shipped build's layout and execution profile (docs/cli.md#build).
fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) =
                (bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b)))
        {
            out.push(hi * 16 + lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_drops_credentials_whatever_they_hold() {
        assert_eq!(redact_url("mqtt://u:p@host:1883"), "mqtt://host:1883");
        assert_eq!(redact_url("mqtts://user:pa/ss:w@rd@broker:8883/x"), "mqtts://broker:8883/x");
        assert_eq!(redact_url("mqtt://host"), "mqtt://host");
        assert_eq!(redact_url("user:secret@host"), "host");
        assert!(!redact_url("mqtt://u:a/b/c@h").contains('a'));
    }

    #[test]
    fn urls() {
        assert_eq!(broker_address("mqtt://127.0.0.1:1883"), Some(("127.0.0.1".into(), 1883, false)));
        assert_eq!(broker_address("mqtts://broker.example"), Some(("broker.example".into(), 8883, true)));
        assert_eq!(broker_address("mqtt://[::1]:1884"), Some(("::1".into(), 1884, false)));
        assert_eq!(broker_address("http://x"), None);
        assert_eq!(broker_address("mqtt://"), None);
    }

    #[test]
    fn credentials_in_the_url_are_used_and_never_shown() {
        assert_eq!(redact_url("mqtt://user:p%40ss@broker:1883"), "mqtt://broker:1883");
        assert_eq!(redact_url("mqtts://broker"), "mqtts://broker");
        assert_eq!(redact_url("ws://broker:8080/mqtt"), "ws://broker:8080/mqtt");
        assert_eq!(redact_url("mqtt://user:pa/ss@broker:1883"), "mqtt://broker:1883", "a / in the password");
        assert_eq!(redact_url("mqtt://user:p?a#s/s@broker"), "mqtt://broker");
        assert_eq!(url_credentials("mqtt://user:p%40ss@broker:1883"), Some(("user".into(), "p@ss".into())));
        assert_eq!(url_credentials("mqtt://broker"), None);
    }
}
