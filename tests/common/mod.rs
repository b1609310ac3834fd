//! Shared helpers of the integration tests: a real mosquitto broker started on a free port, the
//! simulator's demo site as bridge views, an MQTT test client, and golden-file comparison.
#![allow(dead_code)]

pub mod logs;
pub mod process;
pub mod tls;
pub mod web_rig;

use casambi2mqtt::bridge::photos::NetPhoto;
use casambi2mqtt::bridge::state::{Connection, NetworkView, Topology};
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::model::{Fixture, NetworkState};
use casambi2mqtt::mqtt::{self, Config, DiscoveryMode, Protocol, ResolvedCommand, Tuning};
use casambi2mqtt::sim::Simulator;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// Mosquitto
// ---------------------------------------------------------------------------------------------

/// A mosquitto broker run by the test in the foreground on a free loopback port; killed on drop.
pub struct Mosquitto {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    options: BrokerOptions,
    /// A second, plain and anonymous listener for test observers when the main one needs TLS
    /// or a password.
    observer_port: Option<u16>,
    /// mosquitto's `max_packet_size` (none: MQTT's own limit).
    max_packet_size: Option<usize>,
}

/// What a test broker asks of its clients (the default: plain TCP, anonymous).
#[derive(Debug, Clone, Default)]
pub struct BrokerOptions {
    /// Serve TLS on the main listener with this CA-signed server certificate.
    pub tls: Option<tls::Pki>,
    /// Require this user name and password on the main listener (a mosquitto password file is
    /// made with `mosquitto_passwd`).
    pub credentials: Option<(String, String)>,
}

/// Finds `name` in PATH or in `dirs` (Debian puts brokers in /usr/sbin, outside a user's PATH).
pub fn find_binary(name: &str, dirs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(dirs.iter().map(PathBuf::from)).map(|d| d.join(name)).find(|c| c.is_file())
}

/// Finds the mosquitto binary. A missing broker fails the test: these tests must run, not
/// silently pass.
fn mosquitto_binary() -> PathBuf {
    find_binary("mosquitto", &["/usr/sbin", "/usr/local/sbin", "/sbin", "/opt/homebrew/sbin"]).unwrap_or_else(|| {
        panic!(
            "mosquitto not found in PATH or /usr/sbin: the MQTT integration tests need a real broker \
             (Debian/Ubuntu: apt-get install -y mosquitto)"
        )
    })
}

/// Finds `mosquitto_passwd` (Debian/Ubuntu ship it with mosquitto or mosquitto-clients).
fn mosquitto_passwd_binary() -> PathBuf {
    find_binary("mosquitto_passwd", &["/usr/bin", "/usr/local/bin", "/usr/sbin", "/opt/homebrew/bin"]).unwrap_or_else(
        || {
            panic!(
                "mosquitto_passwd not found in PATH: the broker authentication tests need it \
                 (Debian/Ubuntu: apt-get install -y mosquitto mosquitto-clients)"
            )
        },
    )
}

/// Writes a mosquitto password file holding one user.
fn make_password_file(file: &Path, user: &str, password: &str) {
    let out = Command::new(mosquitto_passwd_binary())
        .arg("-b")
        .arg("-c")
        .arg(file)
        .arg(user)
        .arg(password)
        .stdin(Stdio::null())
        .output()
        .expect("run mosquitto_passwd");
    assert!(out.status.success(), "mosquitto_passwd failed: {}", String::from_utf8_lossy(&out.stderr));
    set_mode(file, 0o644);
}

/// Sets a file's permission bits.
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Starts the whole bridge (`app::run`) against `sim` with the demo's network credentials and
/// the broker at `broker_url`; `extra` is YAML appended (sections such as `http:`). Returns its
/// handles, the token that stops it and its task.
pub async fn start_app(
    sim: &Simulator,
    broker_url: &str,
    extra: &str,
) -> (
    casambi2mqtt::app::Running,
    CancellationToken,
    tokio::task::JoinHandle<Result<casambi2mqtt::app::Outcome, casambi2mqtt::app::AppError>>,
) {
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    \
         password: demo\nmqtt:\n  url: {broker_url}\n{extra}",
        sim.base_url(),
        sim.ws_url(),
    );
    let config = casambi2mqtt::config::parse(&yaml, Vec::<(String, String)>::new()).expect("a valid configuration");
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut task = tokio::spawn(casambi2mqtt::app::run(config, shutdown.clone(), Some(tx)));
    match rx.await {
        Ok(running) => (running, shutdown, task),
        Err(_) => panic!("the bridge did not start: {:?}", (&mut task).await),
    }
}

/// Control messages the simulator received, without their wire number.
pub fn sim_controls(sim: &Simulator) -> Vec<serde_json::Value> {
    let mut all = sim.shared().log.controls();
    for m in &mut all {
        if let Some(m) = m.as_object_mut() {
            m.remove("wire");
        }
    }
    all
}

/// Waits up to `max` until the simulator received `n` control messages in all; returns them.
pub async fn wait_sim_controls(sim: &Simulator, n: usize, max: Duration) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let got = sim_controls(sim);
        if got.len() >= n {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} control messages, wanted {n}: {got:#?}", got.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

impl Mosquitto {
    /// Starts a broker on a free port and waits until it accepts connections.
    pub fn start() -> Mosquitto {
        Mosquitto::start_with(BrokerOptions::default())
    }

    /// Starts a broker that requires TLS and/or a password on its main listener ([`Self::url`]),
    /// with a plain anonymous listener beside it for test observers ([`Self::observer_port`]).
    pub fn start_with(options: BrokerOptions) -> Mosquitto {
        let mut m = Mosquitto::configured(options);
        m.spawn_on_free_ports();
        m
    }

    /// A broker not started yet.
    fn configured(options: BrokerOptions) -> Mosquitto {
        let dir = tempfile::tempdir().expect("temp dir");
        // mosquitto started as root drops to its own user before reading certificates and the
        // password file: let it read them (test files only).
        set_mode(dir.path(), 0o755);
        let secured = options.tls.is_some() || options.credentials.is_some();
        Mosquitto {
            child: None,
            port: free_port(),
            dir,
            bin: mosquitto_binary(),
            options,
            observer_port: secured.then(free_port),
            max_packet_size: None,
        }
    }

    /// A default broker that disconnects a client sending a packet bigger than `bytes` (the
    /// whole packet, fixed header included).
    pub fn start_with_max_packet_size(bytes: usize) -> Mosquitto {
        let mut m = Mosquitto::configured(BrokerOptions::default());
        m.max_packet_size = Some(bytes);
        m.spawn_on_free_ports();
        m
    }

    /// The configuration file's text.
    fn conf(&self) -> String {
        // The default log types plus `subscribe`: a line `<client id> <QoS> <filter>` per
        // subscription, for tests that check what the bridge asked for.
        let mut conf = String::from("persistence false\nmax_queued_messages 0\n");
        if let Some(bytes) = self.max_packet_size {
            conf.push_str(&format!("max_packet_size {bytes}\n"));
        }
        for kind in ["error", "warning", "notice", "information", "subscribe"] {
            conf.push_str(&format!("log_type {kind}\n"));
        }
        let Some(observer) = self.observer_port else {
            conf.push_str(&format!("listener {} 127.0.0.1\nallow_anonymous true\n", self.port));
            return conf;
        };
        conf.push_str(&format!("per_listener_settings true\nlistener {} 127.0.0.1\n", self.port));
        if let Some(pki) = &self.options.tls {
            conf.push_str(&format!(
                "cafile {}\ncertfile {}\nkeyfile {}\n",
                pki.ca_cert.display(),
                pki.server_cert.display(),
                pki.server_key.display()
            ));
        }
        match &self.options.credentials {
            Some((user, password)) => {
                let file = self.dir.path().join("passwords");
                make_password_file(&file, user, password);
                conf.push_str(&format!("allow_anonymous false\npassword_file {}\n", file.display()));
            }
            None => conf.push_str("allow_anonymous true\n"),
        }
        conf.push_str(&format!("listener {observer} 127.0.0.1\nallow_anonymous true\n"));
        conf
    }

    /// Starts a broker on its freshly picked ports. Such a port can be taken by another process
    /// (an outgoing connection's source port) before the broker binds it: the broker then moves
    /// to fresh ports, a few times, before giving up.
    fn spawn_on_free_ports(&mut self) {
        for _ in 0..5 {
            match self.try_spawn() {
                Ok(()) => return,
                Err(log) if log.contains("Address already in use") => {
                    self.port = free_port();
                    self.observer_port = self.observer_port.map(|_| free_port());
                }
                Err(log) => panic!("mosquitto exited at start-up: {log}"),
            }
        }
        self.spawn();
    }

    fn spawn(&mut self) {
        if let Err(log) = self.try_spawn() {
            panic!("mosquitto exited with {log}");
        }
    }

    /// Starts the broker and waits until it listens; its exit status and log when it exits.
    fn try_spawn(&mut self) -> Result<(), String> {
        let conf = self.dir.path().join("mosquitto.conf");
        std::fs::write(&conf, self.conf()).expect("write mosquitto.conf");
        let log = std::fs::File::create(self.dir.path().join("mosquitto.log")).expect("log file");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let ports = [Some(self.port), self.observer_port];
        let listening =
            |p: u16| TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], p)), Duration::from_millis(200));
        // A listener of another process on a taken port would answer too: the broker's own
        // word that it runs comes first.
        let running = |log: String| log.lines().any(|l| l.contains(" running"));
        while !running(self.log()) || ports.into_iter().flatten().any(|p| listening(p).is_err()) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Err(format!("{status}: {}", self.log()));
            }
            assert!(Instant::now() < deadline, "mosquitto did not start listening: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }

    /// Whether `client_id` has connected, from the broker's log.
    pub fn has_connected(&self, client_id: &str) -> bool {
        self.log().lines().any(|l| l.contains("New client connected") && l.contains(&format!(" as {client_id} ")))
    }

    /// The QoS of every subscription to `filter` so far, from the broker's log.
    pub fn subscription_qos(&self, filter: &str) -> Vec<u8> {
        self.log()
            .lines()
            .filter_map(|l| {
                let mut words = l.rsplit(' ');
                (words.next() == Some(filter)).then(|| words.next()?.parse().ok()).flatten()
            })
            .collect()
    }

    /// The broker's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mqtt://127.0.0.1:PORT`, or `mqtts://…` when the broker serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.options.tls.is_some() { "mqtts" } else { "mqtt" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// A plain, anonymous port for test observers ([`Watcher`], [`retained`]): the main port
    /// for a default broker, a second listener for one with TLS or a password.
    pub fn observer_port(&self) -> u16 {
        self.observer_port.unwrap_or(self.port)
    }

    /// The broker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Freezes the broker (SIGSTOP): it keeps its sockets open but reads and answers nothing,
    /// like a stuck or overloaded broker. [`Self::resume`] thaws it; dropping kills it anyway.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a [`Self::pause`]d broker (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.pid().expect("broker running");
        let status = Command::new("kill").arg(sig).arg(pid.to_string()).status().expect("run kill");
        assert!(status.success(), "kill {sig} {pid} failed");
    }

    /// Kills the broker (retained messages are lost: persistence is off).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the broker and starts a fresh one on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Kills the broker and starts a fresh one on the same ports with other requirements (a
    /// changed password, TLS switched on or off).
    pub fn reconfigure(&mut self, options: BrokerOptions) {
        self.stop();
        if self.observer_port.is_none() && (options.tls.is_some() || options.credentials.is_some()) {
            self.observer_port = Some(free_port());
        }
        self.options = options;
        self.spawn();
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---------------------------------------------------------------------------------------------
// The demo site as bridge views
// ---------------------------------------------------------------------------------------------

/// The demo site's network ids (Home first).
pub fn demo_network_ids(sim: &Simulator) -> Vec<String> {
    let world = sim.shared().world();
    let mut ids: Vec<String> = world.networks.keys().cloned().collect();
    // Home first, as in the site file.
    ids.sort_by_key(|id| !world.networks[id].def.name.eq("Home"));
    ids
}

/// A fixture of the simulator's catalogue as `GET /v1/fixtures/{id}` returns it.
fn fixture(sim: &Simulator, id: u32) -> Option<Fixture> {
    let world = sim.shared().world();
    let f = world.fixtures.get(&i64::from(id))?;
    let json =
        serde_json::json!({"id": f.id, "type": f.kind, "vendor": f.vendor, "model": f.model, "controls": f.controls});
    Some(serde_json::from_value(json).expect("fixture parses"))
}

/// Applies the simulator's current truth of `network` to `view` (as the bridge core does after
/// `GET /state`), with the fixtures of its units; returns the topology change.
pub fn refresh_view(sim: &Simulator, network: &str, view: &mut NetworkView) -> Topology {
    let json = sim.network_state(network).expect("network exists");
    let state: NetworkState = serde_json::from_value(json).expect("state parses");
    let delta = view.apply_snapshot(state);
    let fixtures =
        view.fixture_ids().into_iter().filter_map(|id| fixture(sim, id).map(|f| (id, Arc::new(f)))).collect();
    view.set_fixtures(fixtures);
    view.set_connection(Connection::Live);
    delta.topology
}

/// A fresh view of `network` from the simulator.
pub fn view_of(sim: &Simulator, network: &str) -> NetworkView {
    let mut view = NetworkView::new(network);
    refresh_view(sim, network, &mut view);
    view
}

/// The `Update::Network` of a view.
pub fn network_update(view: &NetworkView, topology: Topology) -> Update {
    Update::Network { view: Arc::new(view.clone()), topology: Box::new(topology) }
}

/// The `Update::Photos` of `network`'s gallery, as the bridge core sends it after fetching the
/// images (every image of the simulator is a valid PNG unless its site entry says otherwise).
pub fn photos_update(sim: &Simulator, network: &str) -> Update {
    let world = sim.shared().world();
    let photos: Vec<NetPhoto> = world.networks[network]
        .def
        .photos
        .iter()
        .map(|p| {
            let png = casambi2mqtt::sim::images::picture(&p.image).expect("png");
            NetPhoto::new(p.name.clone(), p.image.clone(), png.into())
        })
        .collect();
    Update::Photos { network: network.into(), photos: photos.into() }
}

/// A payload as text: UTF-8 as it is, binary (a photo) as its kind and size, so that golden files
/// stay text.
pub fn payload_text(payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) => text.to_string(),
        Err(_) if payload.starts_with(b"\x89PNG\r\n\x1a\n") => format!("<png, {} bytes>", payload.len()),
        Err(_) => format!("<binary, {} bytes>", payload.len()),
    }
}

// ---------------------------------------------------------------------------------------------
// The bridge's MQTT side
// ---------------------------------------------------------------------------------------------

/// A running MQTT publisher fed by the test.
pub struct Bridge {
    pub updates: mpsc::Sender<Update>,
    pub commands: mpsc::Receiver<ResolvedCommand>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), mqtt::MqttError>>,
}

/// The configuration used by the tests.
pub fn config(url: &str, mode: DiscoveryMode, protocol: Protocol) -> Config {
    let mut c = Config::default();
    c.mqtt.url = url.to_string();
    c.mqtt.protocol = protocol;
    c.mqtt.client_id = format!("casambi2mqtt-test-{}", std::process::id());
    c.homeassistant.discovery = mode;
    c
}

/// Short timings for tests.
pub fn tuning() -> Tuning {
    Tuning {
        scan_delay: Duration::from_millis(500),
        scan: Duration::from_millis(500),
        birth_delay_min: Duration::from_millis(100),
        birth_delay_max: Duration::from_millis(300),
        shutdown_grace: Duration::from_secs(2),
    }
}

/// Starts the publisher.
pub fn start_bridge(config: Config) -> Bridge {
    let (utx, urx) = mpsc::channel(64);
    let (ctx, crx) = mpsc::channel(64);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(mqtt::run_with(config, tuning(), urx, ctx, shutdown.clone()));
    Bridge { updates: utx, commands: crx, shutdown, task }
}

impl Bridge {
    /// Stops cleanly and waits.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let r = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        r.expect("bridge stops in time").expect("task ok").expect("run ok");
    }
}

// ---------------------------------------------------------------------------------------------
// Test MQTT client
// ---------------------------------------------------------------------------------------------

/// A message seen by a [`Watcher`].
#[derive(Debug, Clone)]
pub struct Seen {
    pub topic: String,
    pub payload: String,
    pub retain: bool,
    /// The QoS it was delivered at (the watcher subscribes at QoS 1, so the lower of 1 and the
    /// publisher's).
    pub qos: u8,
}

/// A subscriber recording everything it receives.
pub struct Watcher {
    pub client: AsyncClient,
    rx: mpsc::UnboundedReceiver<Seen>,
    pub seen: Vec<Seen>,
}

static WATCHER_IDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Watcher {
    /// Connects to `port` and subscribes to `filter`; returns once subscribed.
    pub async fn start(port: u16, filter: &str) -> Watcher {
        let n = WATCHER_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut o = MqttOptions::new(format!("test-watch-{}-{n}", std::process::id()), "127.0.0.1", port);
        o.set_max_packet_size(1024 * 1024, 1024 * 1024);
        o.set_keep_alive(Duration::from_secs(30));
        let (client, mut el) = AsyncClient::new(o, 256);
        let (tx, rx) = mpsc::unbounded_channel();
        let (sub_tx, sub_rx) = tokio::sync::oneshot::channel();
        let filter_owned = filter.to_string();
        let c2 = client.clone();
        tokio::spawn(async move {
            let mut sub_tx = Some(sub_tx);
            loop {
                match el.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        let _ = c2.subscribe(filter_owned.clone(), QoS::AtLeastOnce).await;
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        if let Some(t) = sub_tx.take() {
                            let _ = t.send(());
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let seen = Seen {
                            topic: p.topic.clone(),
                            payload: payload_text(&p.payload),
                            retain: p.retain,
                            qos: p.qos as u8,
                        };
                        if tx.send(seen).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), sub_rx).await.expect("watcher subscribed").expect("suback");
        Watcher { client, rx, seen: Vec::new() }
    }

    /// Collects messages until none arrived for `quiet` (or `max` passed); returns the new ones.
    pub async fn settle(&mut self, quiet: Duration, max: Duration) -> Vec<Seen> {
        let deadline = tokio::time::Instant::now() + max;
        let mut new = Vec::new();
        loop {
            let wait = quiet.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            match tokio::time::timeout(wait, self.rx.recv()).await {
                Ok(Some(s)) => new.push(s),
                _ => break,
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
        }
        self.seen.extend(new.iter().cloned());
        new
    }

    /// Waits until a message matching `f` arrives (panics after `max`).
    pub async fn wait_for(&mut self, max: Duration, f: impl Fn(&Seen) -> bool) -> Seen {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(s)) => {
                    self.seen.push(s.clone());
                    if f(&s) {
                        return s;
                    }
                }
                _ => panic!("expected message did not arrive within {max:?}"),
            }
        }
    }

    /// Publishes from the watcher's connection.
    pub async fn publish(&self, topic: &str, payload: &str, retain: bool) {
        self.client.publish(topic, QoS::AtLeastOnce, retain, payload.as_bytes().to_vec()).await.expect("publish");
    }
}

/// Every retained message on the broker (topic → payload), read by a fresh subscriber to `#`.
pub async fn retained(port: u16) -> BTreeMap<String, String> {
    let mut w = Watcher::start(port, "#").await;
    let seen = w.settle(Duration::from_millis(400), Duration::from_secs(10)).await;
    let _ = w.client.disconnect().await;
    seen.into_iter().filter(|s| s.retain).map(|s| (s.topic, s.payload)).collect()
}

/// Polls the broker's retained set until `f` holds (panics after `max` with the last set).
pub async fn retained_until(
    port: u16,
    max: Duration,
    f: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + max;
    loop {
        let r = retained(port).await;
        if f(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "retained state never matched; last:\n{}", render_golden(&r));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Golden files
// ---------------------------------------------------------------------------------------------

/// The retained set as `topic<TAB>payload` lines, sorted, with what changes between runs masked
/// (`started_at` of bridge/info, and the crate version).
pub fn render_golden(retained: &BTreeMap<String, String>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut out = String::new();
    for (topic, payload) in retained {
        let mut p = payload.replace(&format!("\"sw_version\":\"{version}\""), "\"sw_version\":\"<version>\"");
        p = p.replace(&format!("\"version\":\"{version}\""), "\"version\":\"<version>\"");
        if topic.ends_with("/bridge/info")
            && let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&p)
        {
            v["started_at"] = serde_json::json!("<started_at>");
            p = v.to_string();
        }
        out.push_str(topic);
        out.push('\t');
        out.push_str(&p);
        out.push('\n');
    }
    out
}

/// Compares `actual` with the golden file `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites it.
pub fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden file {}; run with UPDATE_GOLDEN=1 and review it", path.display()));
    if expected != actual {
        let exp: Vec<&str> = expected.lines().collect();
        let act: Vec<&str> = actual.lines().collect();
        let mut diff = String::new();
        for l in &exp {
            if !act.contains(l) {
                diff.push_str(&format!("- {l}\n"));
            }
        }
        for l in &act {
            if !exp.contains(l) {
                diff.push_str(&format!("+ {l}\n"));
            }
        }
        panic!("{} differs from the output (UPDATE_GOLDEN=1 rewrites it):\n{diff}", path.display());
    }
}
