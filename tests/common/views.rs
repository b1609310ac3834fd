//! The simulator's demo site as the bridge core's views and updates.

use casambi2mqtt::bridge::photos::NetPhoto;
use casambi2mqtt::bridge::state::{Connection, NetworkView, Topology};
use casambi2mqtt::bridge::update::Update;
use casambi2mqtt::cloud::model::{Fixture, NetworkState};
use casambi2mqtt::sim::Simulator;
use std::sync::Arc;

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
