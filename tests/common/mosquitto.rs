//! A real mosquitto broker run by a test on free loopback ports.

use super::tls;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A loopback port free a moment ago (another process may take it before it is bound).
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
