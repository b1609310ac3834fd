mod common;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::{SimConfig, Simulator};
use common::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn probe() {
    let (logs, _g) = common::logs::capture("casambi2mqtt=trace,casambi2mqtt::sim=off");
    let broker = Mosquitto::start_with(BrokerOptions { tls: None, credentials: Some(("u".into(), "p".into())) });
    let sim = Simulator::start_local(SimConfig::new(Site::demo())).await.unwrap();
    let mut w = Watcher::start(broker.observer_port(), "#").await;
    let yaml = format!(
        "cloud:\n  base_url: {}\n  ws_url: {}\n  api_key: demo-key\nnetworks:\n  - email: demo@example.com\n    password: demo\n  - email: demo@example.com\n    password: wrong\nmqtt:\n  url: {}\n  username: u\n  password: p\nhealth:\n  listen: \"\"\n",
        sim.base_url(),
        sim.ws_url(),
        broker.url()
    );
    let config = casambi2mqtt::config::parse(&yaml, Vec::new()).unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(casambi2mqtt::app::run(config, shutdown.clone(), None));
    let s = w.settle(Duration::from_millis(1500), Duration::from_secs(8)).await;
    println!("error msgs: {:?}", s.iter().filter(|s| s.topic.contains("error")).collect::<Vec<_>>());
    shutdown.cancel();
    let _ = run.await;
    for l in logs.text().lines().filter(|l| l.contains("publisher") || l.contains("rejected") || l.contains("dropped"))
    {
        println!("{}", &l[..l.len().min(220)]);
    }
}
