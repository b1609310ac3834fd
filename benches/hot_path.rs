//! The hot path of the bridge, without I/O: WebSocket frame bytes → `parse_frame` → state merge
//! and diff (`NetworkView::apply_unit`) → the MQTT operations to publish (`mqtt::plan::unit_ops`
//! and `stale_group_ops` on the publisher's render/store layer).
//!
//! The frame is a typical luminaire (`Dimmer` + `CCT`) as the simulator renders it. Every stage is
//! measured on its own and the whole path once for an unchanged and once for a changed event;
//! the global allocator is divan's `AllocProfiler`, so every line also shows the allocations per
//! frame.
//!
//! Run: `cargo bench --bench hot_path` (figures in BENCHMARKS.md).

use casambi2mqtt::bridge::state::{Connection, NetworkView};
use casambi2mqtt::cloud::model::{Fixture, NetworkState, ServerMessage, UnitState, parse_frame};
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::mirror::NetMirror;
use casambi2mqtt::mqtt::plan;
use casambi2mqtt::mqtt::render::Renderer;
use casambi2mqtt::mqtt::state_text::StateText;
use casambi2mqtt::mqtt::store::{Op, Store};
use casambi2mqtt::mqtt::topics::Layout;
use casambi2mqtt::mqtt::{DiscoveryMode, OutputSettings};
use casambi2mqtt::sim::render;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::world::World;
use divan::counter::ItemsCount;
use divan::{AllocProfiler, Bencher, black_box};
use serde_json::json;
use std::sync::Arc;

#[global_allocator]
static ALLOC: AllocProfiler<tikv_jemallocator::Jemalloc> = AllocProfiler::new(tikv_jemallocator::Jemalloc);

/// The unit the frames describe: unit 3 of a generated network is a `Luminaire` with `Dimmer`
/// and `CCT` (fixture 1002), in group 1 with nine other units.
const UNIT: i64 = 3;
const WIRE: u32 = 1;

fn main() {
    divan::main();
}

/// Everything the stages need: two frames of the same unit (Dimmer 0.5 and 0.7), a network
/// view as the core holds it, and the publisher's mirror, renderer and store with everything
/// already published.
struct Fixtures {
    frame_a: Vec<u8>,
    frame_b: Vec<u8>,
    view: NetworkView,
    mirror: NetMirror,
    renderer: Renderer,
    store: Store,
    text: StateText,
}

/// `{"wire":N,"method":"unitChanged",…body…}`, as the simulator's channel sends it.
fn frame(body: &str) -> Vec<u8> {
    let fields = body.strip_prefix('{').expect("a JSON object");
    format!("{{\"wire\":{WIRE},\"method\":\"unitChanged\",{fields}").into_bytes()
}

fn unit_of(frame: &[u8]) -> UnitState {
    match parse_frame(frame).expect("frame parses") {
        ServerMessage::UnitChanged { unit, .. } => *unit,
        other => panic!("not a unitChanged: {other:?}"),
    }
}

fn fixtures() -> Fixtures {
    let site = Site::generate(1, 20);
    let mut world = World::new(&site);
    let net_id = site.networks[0].id.clone();
    let body = |world: &World| {
        let net = &world.networks[&net_id];
        render::unit_event(net, &net.units[&UNIT]).to_string()
    };
    world.set_unit_state(&net_id, UNIT, None, None, &[json!({"type": "Dimmer", "value": 0.5})]).expect("unit exists");
    let frame_a = frame(&body(&world));
    world.set_unit_state(&net_id, UNIT, None, None, &[json!({"type": "Dimmer", "value": 0.7})]).expect("unit exists");
    let frame_b = frame(&body(&world));
    world.set_unit_state(&net_id, UNIT, None, None, &[json!({"type": "Dimmer", "value": 0.5})]).expect("unit exists");

    let mut view = live_view(&world, &net_id);
    // The live event of the current state (frame A) leaves the view as it is.
    view.apply_unit(unit_of(&frame_a), true);

    let renderer = fixtures_renderer();
    let (mirror, store) = published(&renderer, view.clone());
    Fixtures { frame_a, frame_b, view, mirror, renderer, store, text: StateText::default() }
}

/// The core's view of a network after its start-up snapshot (REST shapes), with the fixtures,
/// its wire live.
fn live_view(world: &World, net_id: &str) -> NetworkView {
    let net = &world.networks[net_id];
    let state: NetworkState = serde_json::from_value(render::network(net, true)).expect("state parses");
    let mut view = NetworkView::new(net_id);
    view.apply_snapshot(state);
    let fixtures = view
        .fixture_ids()
        .into_iter()
        .filter_map(|id| {
            let f = world.fixtures.get(&i64::from(id))?;
            let fixture: Fixture = serde_json::from_value(render::fixture(f)).expect("fixture parses");
            Some((id, Arc::new(fixture)))
        })
        .collect();
    view.set_fixtures(fixtures);
    view.set_connection(Connection::Live);
    view
}

/// The publisher's mirror and store of `view` with everything already published.
fn published(renderer: &Renderer, view: NetworkView) -> (NetMirror, Store) {
    let mirror = NetMirror::new(view, "site_1".into());
    let mut store = Store::default();
    for op in plan::network_ops(renderer, &mut store, &mirror) {
        store.record(op.receipt());
    }
    (mirror, store)
}

/// The renderer of the default configuration (device discovery, attribute topics on).
fn fixtures_renderer() -> Renderer {
    Renderer {
        layout: Layout::new("casambi"),
        discovery: Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Device, qos: 1 }),
        attribute_topics: OutputSettings::default().attribute_topics,
        data_sensors: Default::default(),
    }
}

fn sent(store: &mut Store, ops: &[Op]) {
    for op in ops {
        store.record(op.receipt());
    }
}

/// Stage 1: bytes → `ServerMessage`.
#[divan::bench]
fn parse(bencher: Bencher) {
    let f = fixtures();
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| parse_frame(black_box(&f.frame_a)));
}

/// Stage 2a: the diff of an event equal to the stored state (the initial burst after every
/// wire open, resyncs). Must not allocate.
#[divan::bench]
fn diff_unchanged(bencher: Bencher) {
    let mut f = fixtures();
    let unit = unit_of(&f.frame_a);
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| unit.clone())
        .bench_local_values(|u| f.view.apply_unit(black_box(u), true));
}

/// Stage 2b: the diff and merge of a changed event. As in the bridge, the previous version of
/// the unit is still held by the MQTT side (an `Arc` clone went out with the last update), so the
/// merge cannot reuse it in place.
#[divan::bench]
fn diff_changed(bencher: Bencher) {
    let mut f = fixtures();
    let units = [unit_of(&f.frame_b), unit_of(&f.frame_a)];
    let mut next = 0usize;
    let mut held = f.view.units.get(&(UNIT as u32)).cloned();
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            next += 1;
            units[next % 2].clone()
        })
        .bench_local_values(|u| {
            let delta = f.view.apply_unit(black_box(u), true);
            // The update sent to the publisher: a clone of the new version replaces the old one.
            let old = std::mem::replace(&mut held, f.view.units.get(&(UNIT as u32)).cloned());
            (delta, old)
        });
}

/// The operations of one changed unit taken in alone: its own, then its groups'. The publisher
/// renders a group once for all the member changes waiting; one change at a time is the most a
/// change can cost.
fn change_ops(
    renderer: &Renderer,
    store: &mut Store,
    mirror: &mut NetMirror,
    text: &mut StateText,
    unit: Arc<UnitState>,
) -> Vec<Op> {
    let mut ops = plan::unit_ops(renderer, store, mirror, text, unit);
    ops.extend(plan::stale_group_ops(renderer, store, mirror, text));
    ops
}

/// `u` with its Dimmer at `level`.
fn at_level(u: &UnitState, level: f64) -> Arc<UnitState> {
    let mut v = u.clone();
    for c in v.controls.iter_mut().flatten() {
        if let casambi2mqtt::cloud::model::Control::Dimmer(d) = c {
            d.value = level;
        }
    }
    Arc::new(v)
}

/// Stage 3: a changed unit → the operations to publish (render the unit's and its group's
/// topics, compare with what was published, record what is sent).
#[divan::bench]
fn render(bencher: Bencher) {
    let mut f = fixtures();
    let units = [Arc::new(unit_of(&f.frame_b)), Arc::new(unit_of(&f.frame_a))];
    let mut next = 0usize;
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            next += 1;
            units[next % 2].clone()
        })
        .bench_local_values(|u| {
            let ops = change_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text, black_box(u));
            sent(&mut f.store, &ops);
            ops
        });
}

/// Stage 3 with a cold working set: changes round-robin over the 200 `Dimmer + CCT` units of a
/// 1,000-unit network (the store then holds ~17,000 topics), as on a busy site where consecutive
/// events rarely concern the same unit.
#[divan::bench]
fn render_cold(bencher: Bencher) {
    let site = Site::generate(1, 1000);
    let world = World::new(&site);
    let net_id = site.networks[0].id.clone();
    let f = fixtures_renderer();
    let (mut mirror, mut store) = published(&f, live_view(&world, &net_id));
    // Two versions (Dimmer 0.7 and 0.5) of every tunable unit.
    let units: Vec<[Arc<UnitState>; 2]> = mirror
        .view
        .units
        .values()
        .filter(|u| u.fixture_id.get() == Some(1002))
        .map(|u| [at_level(u, 0.7), at_level(u, 0.5)])
        .collect();
    let mut text = StateText::default();
    let mut next = 0usize;
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            next += 1;
            units[next % units.len()][(next / units.len()) % 2].clone()
        })
        .bench_local_values(|u| {
            let ops = change_ops(&f, &mut store, &mut mirror, &mut text, black_box(u));
            sent(&mut store, &ops);
            ops
        });
}

/// A scene over group 1: each of its luminaires set to one level (0.3, then 0.6 the next
/// iteration), with each member taken in alone (its group rendered after each, as before the
/// publisher batched groups) …
#[divan::bench]
fn scene_one_by_one(bencher: Bencher) {
    scene(bencher, false);
}

/// … and with the members taken in together, the group rendered once after them (the
/// publisher's batches). Per unit, like every stage.
#[divan::bench]
fn scene_together(bencher: Bencher) {
    scene(bencher, true);
}

fn scene(bencher: Bencher, together: bool) {
    let mut f = fixtures();
    let members = f.mirror.view.groups[&1].units.clone();
    let at = |level: f64| -> Vec<Arc<UnitState>> {
        members
            .iter()
            .filter_map(|id| f.mirror.view.units.get(id))
            .filter(|u| f.mirror.is_light(u))
            .map(|u| at_level(u, level))
            .collect()
    };
    let levels = [at(0.3), at(0.6)];
    let mut next = 0usize;
    bencher
        .counter(ItemsCount::new(levels[0].len()))
        .with_inputs(|| {
            next += 1;
            levels[next % 2].clone()
        })
        .bench_local_values(|units| {
            let mut ops = Vec::new();
            for u in units {
                let u = black_box(u);
                ops.extend(if together {
                    plan::unit_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text, u)
                } else {
                    change_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text, u)
                });
            }
            // Taken in together: the group once, after its members (nothing is left otherwise).
            ops.extend(plan::stale_group_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text));
            sent(&mut f.store, &ops);
            ops
        });
}

/// The whole path for an unchanged event: bytes → parse → diff (nothing to publish).
#[divan::bench]
fn pipeline_unchanged(bencher: Bencher) {
    let mut f = fixtures();
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        let Ok(ServerMessage::UnitChanged { unit, .. }) = parse_frame(black_box(&f.frame_a)) else {
            panic!("frame parses")
        };
        let delta = f.view.apply_unit(*unit, true);
        assert!(!delta.changed);
        delta
    });
}

/// The whole path for a changed event: bytes → parse → diff and merge → operations to publish.
#[divan::bench]
fn pipeline_changed(bencher: Bencher) {
    let mut f = fixtures();
    let frames = [f.frame_b.clone(), f.frame_a.clone()];
    let mut next = 0usize;
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            next += 1;
            next % 2
        })
        .bench_local_values(|i| {
            let Ok(ServerMessage::UnitChanged { unit, .. }) = parse_frame(black_box(&frames[i])) else {
                panic!("frame parses")
            };
            let id = unit.id;
            let delta = f.view.apply_unit(*unit, true);
            let mut ops = Vec::new();
            if delta.changed
                && let Some(unit) = f.view.units.get(&id).cloned()
            {
                ops = change_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text, unit);
                sent(&mut f.store, &ops);
            }
            ops
        });
}

/// The sizes the figures refer to (printed once, so BENCHMARKS.md can quote them).
#[divan::bench]
fn sizes(bencher: Bencher) {
    let mut f = fixtures();
    let unit = Arc::new(unit_of(&f.frame_b));
    let ops = change_ops(&f.renderer, &mut f.store, &mut f.mirror, &mut f.text, unit);
    let published: usize = ops
        .iter()
        .map(|op| match op {
            Op::Publish { payload, .. } => payload.len(),
            Op::Clear { .. } => 0,
        })
        .sum();
    eprintln!(
        "frame: {} bytes; a changed event publishes {} messages, {published} payload bytes: {:?}",
        f.frame_a.len(),
        ops.len(),
        ops.iter()
            .map(|op| match op {
                Op::Publish { topic, payload, .. } => format!("{topic} ({} B)", payload.len()),
                Op::Clear { topic } => format!("{topic} (clear)"),
            })
            .collect::<Vec<_>>()
    );
    bencher.bench(|| black_box(f.frame_a.len()));
}
