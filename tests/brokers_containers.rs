//! The broker matrix's checks (tests/common/matrix.rs) against container images of other
//! brokers: eclipse-mosquitto:2, emqx/emqx:5, hivemq/hivemq-ce and vernemq/vernemq. Opt-in and
//! ignored by default, for they need a Docker engine (this project's CI machine has none):
//!
//! ```text
//! cargo test --features broker-containers --test brokers_containers -- --ignored
//! ```
//!
//! Without the feature this file compiles to nothing; with it and without a Docker engine each
//! test fails, naming the engine it could not reach. The containers' brokers are not restarted
//! (a restarted container may come back on another host port, which the bridge's URL cannot
//! follow): restarts are checked on the brokers of tests/brokers.rs.
#![cfg(feature = "broker-containers")]

mod common;
#[path = "common/matrix.rs"]
mod matrix;
#[path = "common/nats.rs"]
mod nats;

use std::time::Duration;
use testcontainers::core::{ContainerPort, IntoContainerPort};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

const IGNORED: &str = "needs a Docker engine: cargo test --features broker-containers -- --ignored";

/// Starts `image:tag` with `env` and `cmd`, and waits until its MQTT port (1883) answers a
/// CONNECT; returns the container (removed on drop) and the port on this host.
async fn broker(image: &str, tag: &str, env: &[(&str, &str)], cmd: &[&str]) -> (ContainerAsync<GenericImage>, u16) {
    let mqtt: ContainerPort = 1883.tcp();
    let mut request =
        GenericImage::new(image, tag).with_exposed_port(mqtt).with_startup_timeout(Duration::from_secs(180));
    for (name, value) in env {
        request = request.with_env_var(*name, *value);
    }
    if !cmd.is_empty() {
        request = request.with_cmd(cmd.iter().copied());
    }
    let container = request.start().await.unwrap_or_else(|e| panic!("cannot start {image}:{tag} ({IGNORED}): {e}"));
    let port = container.get_host_port_ipv4(mqtt).await.unwrap_or_else(|e| panic!("{image}:{tag}: no host port: {e}"));
    nats::wait_mqtt_ready(port, Duration::from_secs(120)).await.unwrap_or_else(|e| panic!("{image}:{tag}: {e}"));
    (container, port)
}

/// The matrix with `mqtt.protocol: auto` on a broker that speaks MQTT 5.
async fn run(name: &str, port: u16) {
    let url = format!("mqtt://127.0.0.1:{port}");
    let site = matrix::start_site(&url, port, "auto").await;
    println!("broker matrix: {name}, mqtt.protocol auto: start-up snapshot in {:?}", site.started_in);
    let r = matrix::all_retained(port, "casambi/bridge/state", Duration::from_secs(20)).await;
    let info: serde_json::Value = serde_json::from_str(&r["casambi/bridge/info"]).expect("bridge/info is JSON");
    assert_eq!(info["mqtt_protocol"], "5", "{name}: {info}");
    matrix::check_change(&site.sim, port).await;
    matrix::check_command(&site.sim, port).await;
    matrix::check_birth(port).await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker engine: cargo test --features broker-containers -- --ignored"]
async fn eclipse_mosquitto_2() {
    // The image's default configuration listens on the container's loopback only.
    let (_c, port) = broker("eclipse-mosquitto", "2", &[], &["mosquitto", "-c", "/mosquitto-no-auth.conf"]).await;
    run("eclipse-mosquitto:2", port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker engine: cargo test --features broker-containers -- --ignored"]
async fn emqx_5() {
    let (_c, port) = broker("emqx/emqx", "5", &[], &[]).await;
    run("emqx/emqx:5", port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker engine: cargo test --features broker-containers -- --ignored"]
async fn hivemq_ce() {
    let (_c, port) = broker("hivemq/hivemq-ce", "latest", &[], &[]).await;
    run("hivemq/hivemq-ce", port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker engine: cargo test --features broker-containers -- --ignored"]
async fn vernemq() {
    let env = [("DOCKER_VERNEMQ_ACCEPT_EULA", "yes"), ("DOCKER_VERNEMQ_ALLOW_ANONYMOUS", "on")];
    let (_c, port) = broker("vernemq/vernemq", "latest", &env, &[]).await;
    run("vernemq/vernemq", port).await;
}
