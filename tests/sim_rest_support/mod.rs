//! Helpers shared by the simulator's REST tests: a client bound to one simulator, with the key
//! and session headers the simulator is configured with.

#![allow(dead_code)]

use casambi2mqtt::sim::site::{DEMO_API_KEY, DEMO_NETWORK_EMAIL, DEMO_PASSWORD, DEMO_USER_EMAIL, Site};
use casambi2mqtt::sim::{SimConfig, Simulator};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The demo site's "Home" network.
pub const HOME: &str = "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b";
/// The demo site's "Office" network.
pub const OFFICE: &str = "c0ffee00aa11bb22cc33dd44ee55ff66";

/// A simulator and a client for it.
pub struct Api {
    pub sim: Simulator,
    pub http: reqwest::Client,
    pub key: String,
}

impl Api {
    pub async fn start(config: SimConfig) -> Api {
        let sim = Simulator::start_local(config).await.unwrap();
        Api { sim, http: reqwest::Client::new(), key: DEMO_API_KEY.to_string() }
    }

    pub async fn demo() -> Api {
        Api::start(SimConfig::new(Site::demo())).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.sim.base_url(), path)
    }

    pub fn key_header(&self) -> String {
        self.sim.shared().config.key_header.clone()
    }

    pub fn session_header(&self) -> String {
        self.sim.shared().config.session_header.clone()
    }

    /// POST with the key; (status, JSON body).
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(self.url(path)).header(self.key_header(), &self.key).json(&body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }

    /// GET with the key and an optional session; the raw response.
    pub async fn get_raw(&self, path: &str, session: Option<&str>) -> reqwest::Response {
        let mut req = self.http.get(self.url(path)).header(self.key_header(), &self.key);
        if let Some(s) = session {
            req = req.header(self.session_header(), s);
        }
        req.send().await.unwrap()
    }

    /// GET; (status, JSON body). Every non-image answer must be JSON.
    pub async fn get(&self, path: &str, session: Option<&str>) -> (u16, Value) {
        let r = self.get_raw(path, session).await;
        let status = r.status().as_u16();
        let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
        assert_eq!(ct.as_deref(), Some("application/json"), "{path}");
        (status, r.json().await.unwrap())
    }

    /// GET a PNG; (status, bytes).
    pub async fn get_png(&self, path: &str, session: Option<&str>) -> (u16, Vec<u8>) {
        let r = self.get_raw(path, session).await;
        let status = r.status().as_u16();
        if status == 200 {
            assert_eq!(r.headers()["content-type"], "image/png", "{path}");
        }
        (status, r.bytes().await.unwrap().to_vec())
    }

    /// Network sessions for every demo network (network credentials).
    pub async fn network_sessions(&self) -> Value {
        let (status, body) =
            self.post("/v1/networks/session", json!({"email": DEMO_NETWORK_EMAIL, "password": DEMO_PASSWORD})).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The network session id of one network.
    pub async fn session(&self, network: &str) -> String {
        let body = self.network_sessions().await;
        body[network]["sessionId"].as_str().unwrap().to_string()
    }

    /// A user session id (site credentials).
    pub async fn user_session(&self) -> String {
        let (status, body) =
            self.post("/v1/users/session", json!({"email": DEMO_USER_EMAIL, "password": DEMO_PASSWORD})).await;
        assert_eq!(status, 200, "{body}");
        body["sessionId"].as_str().unwrap().to_string()
    }

    /// Sends a raw HTTP/1.1 request and returns the whole answer as text (to see the reason
    /// phrase, which HTTP clients do not expose).
    pub async fn raw(&self, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(self.sim.addr()).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }
}

/// Decodes a PNG; (width, height, RGBA-or-other pixels).
pub fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}
