//! The embedded broker's front listener: reads the start of each connection's first packet (a
//! CONNECT), picks rumqttd's MQTT 3.1.1 or MQTT 5 listener by the protocol level it names, and
//! relays the connection there, the bytes already read first.
//!
//! A CONNECT starts with the fixed header (`0x10`, the remaining length in 1–4 bytes), then the
//! protocol name (a 2-byte length, `MQTT`) and the protocol level: 4 for 3.1.1, 5 for MQTT 5
//! (MQTT 3.1 names `MQIsdp`, level 3, and goes to the 3.1.1 listener, which refuses it).

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a client may take to send the start of its CONNECT.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// The most bytes read before the protocol level: the fixed header (5) and a protocol name
/// (2 + 6 for `MQIsdp`) with the level byte.
const MAX_PREFIX: usize = 14;

/// rumqttd's listeners on loopback.
#[derive(Debug, Clone, Copy)]
pub struct Backends {
    /// MQTT 3.1.1 (and older).
    pub v4: SocketAddr,
    /// MQTT 5.
    pub v5: SocketAddr,
}

/// What the bytes read so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Level {
    /// Not enough bytes yet.
    NeedMore,
    /// The CONNECT's protocol level.
    Is(u8),
    /// Not a CONNECT packet.
    NotConnect,
}

/// Reads the protocol level from the start of a CONNECT packet.
pub fn protocol_level(bytes: &[u8]) -> Level {
    let Some(&first) = bytes.first() else { return Level::NeedMore };
    if first != 0x10 {
        return Level::NotConnect;
    }
    // The remaining length: 1 to 4 bytes, each with a continuation bit.
    let mut at = 1;
    loop {
        let Some(&b) = bytes.get(at) else { return Level::NeedMore };
        at += 1;
        if b & 0x80 == 0 {
            break;
        }
        if at == 5 {
            return Level::NotConnect;
        }
    }
    let (Some(&hi), Some(&lo)) = (bytes.get(at), bytes.get(at + 1)) else { return Level::NeedMore };
    let name_len = usize::from(u16::from_be_bytes([hi, lo]));
    if name_len > 6 {
        return Level::NotConnect;
    }
    match bytes.get(at + 2 + name_len) {
        Some(&level) => Level::Is(level),
        None => Level::NeedMore,
    }
}

/// Accepts connections until the process ends, relaying each to its backend.
pub async fn serve(listener: TcpListener, backends: Backends) {
    loop {
        match listener.accept().await {
            Ok((client, peer)) => {
                tokio::spawn(async move {
                    if let Err(e) = relay(client, backends).await {
                        tracing::debug!(%peer, error = %e, "embedded broker: connection closed");
                    }
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "embedded broker: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads the CONNECT's start from `client`, then relays it to the backend of its version.
async fn relay(mut client: TcpStream, backends: Backends) -> std::io::Result<()> {
    let mut prefix = Vec::with_capacity(MAX_PREFIX);
    let level = tokio::time::timeout(CONNECT_WAIT, async {
        let mut byte = [0u8; MAX_PREFIX];
        loop {
            match protocol_level(&prefix) {
                Level::NeedMore => {}
                found => return Ok(found),
            }
            // Only as many bytes as may still belong to the prefix, so nothing is read past it
            // that would need holding back (it is relayed with the prefix anyway).
            let n = client.read(&mut byte[..MAX_PREFIX - prefix.len()]).await?;
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before CONNECT"));
            }
            prefix.extend_from_slice(&byte[..n]);
        }
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no CONNECT in time"))??;
    let backend = match level {
        Level::Is(5) => backends.v5,
        Level::Is(_) => backends.v4,
        _ => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not an MQTT CONNECT")),
    };
    let mut server = TcpStream::connect(backend).await?;
    server.set_nodelay(true)?;
    client.set_nodelay(true)?;
    server.write_all(&prefix).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Level, protocol_level};

    #[test]
    fn the_protocol_level_is_read_from_a_connect() {
        // MQTT 5 and 3.1.1 CONNECTs as clients send them (remaining length in one byte).
        assert_eq!(protocol_level(&[0x10, 0x10, 0, 4, b'M', b'Q', b'T', b'T', 5, 2]), Level::Is(5));
        assert_eq!(protocol_level(&[0x10, 0x10, 0, 4, b'M', b'Q', b'T', b'T', 4]), Level::Is(4));
        // A remaining length of two bytes, and MQTT 3.1's longer name.
        assert_eq!(protocol_level(&[0x10, 0x80, 0x01, 0, 4, b'M', b'Q', b'T', b'T', 5]), Level::Is(5));
        assert_eq!(protocol_level(&[0x10, 0x20, 0, 6, b'M', b'Q', b'I', b's', b'd', b'p', 3]), Level::Is(3));
    }

    #[test]
    fn a_partial_connect_asks_for_more_and_other_packets_are_refused() {
        let full = [0x10, 0x10, 0, 4, b'M', b'Q', b'T', b'T', 5];
        for n in 0..full.len() {
            assert_eq!(protocol_level(&full[..n]), Level::NeedMore, "{n} bytes");
        }
        assert_eq!(protocol_level(&[0x30, 0x10]), Level::NotConnect, "a PUBLISH first");
        assert_eq!(protocol_level(&[0x10, 0x80, 0x80, 0x80, 0x80, 0x01]), Level::NotConnect, "a 5-byte length");
        assert_eq!(protocol_level(&[0x10, 0x10, 0, 200]), Level::NotConnect, "a long protocol name");
    }
}
