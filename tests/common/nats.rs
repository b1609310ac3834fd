//! NATS's MQTT gateway for the broker matrix (tests/brokers.rs): `nats-server` run by the test
//! from a configuration file it writes into a temporary directory, on free loopback ports, alone
//! or as one node of a cluster. MQTT on NATS speaks 3.1.1 only, at QoS 0 and 1, and keeps its
//! sessions and retained messages in JetStream, which it therefore needs (and a `server_name`).
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Finds `nats-server` in PATH or /usr/sbin (Debian's package puts it there). A missing broker
/// fails the test: these tests must run, not silently pass.
pub fn nats_binary() -> PathBuf {
    crate::common::find_binary("nats-server", &["/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/opt/homebrew/bin"])
        .unwrap_or_else(|| {
            panic!(
                "nats-server not found in PATH or /usr/sbin: the broker matrix needs it \
                 (Debian/Ubuntu: apt-get install -y nats-server)"
            )
        })
}

pub use crate::common::free_port;

/// How often a node moves to fresh ports when the ones it was given are taken.
const PORT_RETRIES: usize = 5;

/// How a node is set up.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// JetStream on (MQTT needs it; off only to test what a bridge sees without it).
    pub jetstream: bool,
    /// Cluster membership: the cluster's name, this node's route port and every node's route
    /// port (its own included; NATS ignores a route to itself).
    pub cluster: Option<(String, u16, Vec<u16>)>,
    /// User name and password required of MQTT clients.
    pub credentials: Option<(String, String)>,
}

impl Default for NatsOptions {
    fn default() -> Self {
        NatsOptions { jetstream: true, cluster: None, credentials: None }
    }
}

/// One `nats-server` process; killed on drop. Its JetStream store lives in its own temporary
/// directory, kept across [`Nats::restart`].
pub struct Nats {
    child: Option<Child>,
    dir: tempfile::TempDir,
    name: String,
    mqtt_port: u16,
    client_port: u16,
    options: NatsOptions,
}

impl Nats {
    /// A standalone node with JetStream, on free ports, ready for MQTT clients.
    pub fn start() -> Nats {
        Nats::start_with("n1", free_port(), NatsOptions::default())
    }

    /// A node named `name` serving MQTT on `mqtt_port`; panics with the server's output when it
    /// exits at start-up. A free port picked by the caller can be taken by another process (an
    /// outgoing connection's source port) before the node binds it: the node then moves to fresh
    /// ports, a few times, before giving up.
    pub fn start_with(name: &str, mqtt_port: u16, options: NatsOptions) -> Nats {
        let mut n = Nats::spawn_only(name, mqtt_port, options);
        for _ in 0..PORT_RETRIES {
            match n.try_wait_listening() {
                Ok(()) => return n,
                Err(log) if log.contains("address already in use") => n.move_ports(),
                Err(log) => panic!("nats-server {name} exited at start-up: {log}"),
            }
        }
        n.wait_listening();
        n
    }

    /// Picks fresh ports for a node whose start failed on a taken port, and starts it again.
    fn move_ports(&mut self) {
        self.mqtt_port = free_port();
        self.client_port = free_port();
        if let Some((_, port, routes)) = &mut self.options.cluster {
            // Only a node without peers can move its route port: peers know it by number.
            if routes.is_empty() {
                *port = free_port();
            }
        }
        let _ = std::fs::remove_file(self.log_path());
        self.spawn();
    }

    /// Starts the process and returns at once (a cluster's nodes wait for each other).
    pub fn spawn_only(name: &str, mqtt_port: u16, options: NatsOptions) -> Nats {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut n = Nats { child: None, dir, name: name.to_string(), mqtt_port, client_port: free_port(), options };
        n.spawn();
        n
    }

    /// The configuration file's text.
    fn conf(&self) -> String {
        let mut conf =
            format!("server_name: {}\nlisten: 127.0.0.1:{}\nmax_payload: 1048576\n", self.name, self.client_port);
        if self.options.jetstream {
            let store = self.dir.path().join("jetstream");
            conf.push_str(&format!("jetstream {{\n  store_dir: \"{}\"\n}}\n", store.display()));
        }
        if let Some((cluster, port, routes)) = &self.options.cluster {
            let routes: Vec<String> = routes.iter().map(|p| format!("nats-route://127.0.0.1:{p}")).collect();
            conf.push_str(&format!(
                "cluster {{\n  name: {cluster}\n  listen: 127.0.0.1:{port}\n  routes: [{}]\n}}\n",
                routes.join(", ")
            ));
        }
        conf.push_str(&format!("mqtt {{\n  listen: 127.0.0.1:{}\n", self.mqtt_port));
        if let Some((user, password)) = &self.options.credentials {
            conf.push_str(&format!(
                "  authorization {{\n    username: \"{user}\"\n    password: \"{password}\"\n  }}\n"
            ));
        }
        conf.push_str("}\n");
        conf
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    fn spawn(&mut self) {
        let conf = self.dir.path().join("nats.conf");
        std::fs::write(&conf, self.conf()).expect("write nats.conf");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path()).expect("log file");
        let bin = nats_binary();
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        self.child = Some(child);
    }

    /// Waits until the MQTT port accepts TCP connections (MQTT sessions may need JetStream a
    /// little longer: see [`wait_mqtt_ready`]).
    pub fn wait_listening(&mut self) {
        if let Err(log) = self.try_wait_listening() {
            panic!("nats-server {} exited: {log}", self.name);
        }
    }

    /// [`Self::wait_listening`], returning the server's output when it exits instead.
    fn try_wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.mqtt_port));
        // A listener of another process on a taken port would answer too: the server's own
        // word that it is ready comes first.
        while !self.log().contains("Server is ready")
            || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
        {
            if let Some(status) = self.exited() {
                self.child = None;
                return Err(format!("{status}: {}", self.log()));
            }
            assert!(Instant::now() < deadline, "nats-server {} did not listen: {}", self.name, self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The exit status, once the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The MQTT port.
    pub fn port(&self) -> u16 {
        self.mqtt_port
    }

    /// `mqtt://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.mqtt_port)
    }

    /// Stops the node the way an operator does (SIGTERM: JetStream flushes its store), and
    /// waits; SIGKILL after 10 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.wait();
    }

    /// Starts a [`Nats::stop`]ped node again on the same ports with the same store.
    pub fn start_again(&mut self) {
        self.spawn();
        self.wait_listening();
    }

    /// Stops the node and starts it again.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three nodes of one cluster on loopback (routes between all), each with JetStream and MQTT.
pub struct NatsCluster {
    pub nodes: Vec<Nats>,
}

impl NatsCluster {
    /// Starts the three nodes and waits until each serves MQTT sessions (JetStream has elected
    /// its meta leader).
    pub async fn start() -> NatsCluster {
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes: Vec<Nats> = routes
            .iter()
            .enumerate()
            .map(|(i, route)| {
                let options =
                    NatsOptions { cluster: Some(("c2m".into(), *route, routes.clone())), ..NatsOptions::default() };
                Nats::spawn_only(&format!("n{}", i + 1), free_port(), options)
            })
            .collect();
        for n in &mut nodes {
            n.wait_listening();
        }
        for n in &nodes {
            wait_mqtt_ready(n.port(), Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{e}\n{}", n.log()));
        }
        NatsCluster { nodes }
    }
}

/// Waits until an MQTT 3.1.1 client gets a CONNACK on `port` (and disconnects it again).
pub async fn wait_mqtt_ready(port: u16, max: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + max;
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        let id = format!("ready-{}-{port}", std::process::id());
        let mut o = rumqttc::MqttOptions::new(id, "127.0.0.1", port);
        o.set_keep_alive(Duration::from_secs(10));
        let (client, mut el) = rumqttc::AsyncClient::new(o, 4);
        match tokio::time::timeout(Duration::from_secs(8), el.poll()).await {
            Ok(Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_)))) => {
                let _ = client.disconnect().await;
                let _ = tokio::time::timeout(Duration::from_secs(1), el.poll()).await;
                return Ok(());
            }
            Ok(other) => last = format!("{other:?}"),
            Err(_) => last = "no CONNACK within 8 s".into(),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!("MQTT on port {port} not ready within {max:?}: {last}"))
}
