//! Where the bridge's memory goes on a big site, without I/O: the bytes and heap blocks held by
//! the core's network views, the publisher's mirrors and its store of wanted and published
//! topics, for a generated site (default 100 networks × 250 units), everything published.
//!
//! Run: `cargo run --release --example bench_memory [-- --site 100x250 --attribute-topics false]`.
//! A counting allocator measures what is requested (no allocator overhead); `bench_scale`
//! measures the whole process (`VmHWM`). Figures in BENCHMARKS.md.

use anyhow::Context;
use casambi2mqtt::bridge::state::{Connection, NetworkView};
use casambi2mqtt::cloud::datapoints::{Datapoint, DatapointValue};
use casambi2mqtt::cloud::model::{Fixture, NetworkState};
use casambi2mqtt::mqtt::DiscoveryMode;
use casambi2mqtt::mqtt::discovery::Discovery;
use casambi2mqtt::mqtt::mirror::NetMirror;
use casambi2mqtt::mqtt::plan;
use casambi2mqtt::mqtt::render::Renderer;
use casambi2mqtt::mqtt::store::Store;
use casambi2mqtt::mqtt::topics::Layout;
use casambi2mqtt::sim::render;
use casambi2mqtt::sim::site::Site;
use casambi2mqtt::sim::world::World;
use clap::Parser;
use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts the bytes and blocks currently allocated.
struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);
/// Live blocks by requested size (the last slot: every size from [`SIZES`] − 1 up).
const SIZES: usize = 4097;
static BY_SIZE: [AtomicIsize; SIZES] = [const { AtomicIsize::new(0) }; SIZES];

fn count(size: usize, delta: isize) {
    BY_SIZE[size.min(SIZES - 1)].fetch_add(delta, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        count(layout.size(), 1);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        count(layout.size(), -1);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// What is allocated now.
#[derive(Clone)]
struct Held {
    bytes: isize,
    blocks: isize,
    by_size: Vec<isize>,
}

fn held() -> Held {
    Held {
        bytes: BYTES.load(Ordering::Relaxed),
        blocks: BLOCKS.load(Ordering::Relaxed),
        by_size: BY_SIZE.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
    }
}

/// With `--sizes`: the block sizes that hold the most bytes since `before`.
fn report_sizes(before: &Held, now: &Held) {
    let mut sizes: Vec<(usize, isize)> =
        now.by_size.iter().zip(&before.by_size).map(|(n, b)| n - b).enumerate().filter(|(_, n)| *n > 0).collect();
    sizes.sort_by_key(|(size, n)| std::cmp::Reverse(*size as isize * n));
    for (size, n) in sizes.into_iter().take(12) {
        let plus = if size == SIZES - 1 { "+" } else { "" };
        println!("      {n:>8} blocks of {size:>5}{plus} B = {:>6.2} MB", (size as isize * n) as f64 / 1e6);
    }
}

fn report(what: &str, before: Held, per: usize, sizes: bool) -> Held {
    let now = held();
    let (bytes, blocks) = (now.bytes - before.bytes, now.blocks - before.blocks);
    println!(
        "  {what:<34} {:>8.1} MB in {:>9} blocks ({:>5} B per unit)",
        bytes as f64 / 1e6,
        blocks,
        bytes / per.max(1) as isize
    );
    if sizes {
        report_sizes(&before, &now);
    }
    now
}

#[derive(Parser)]
struct Args {
    /// The generated site, NETWORKSxUNITS.
    #[arg(long, default_value = "100x250")]
    site: String,
    /// Publish the per-attribute topics (the default configuration does).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    attribute_topics: bool,
    /// Also list, for each part, the block sizes that hold the most bytes (the sizes requested;
    /// the allocator rounds each up to its size class).
    #[arg(long)]
    sizes: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (networks, units) = args.site.split_once('x').context("--site is NETWORKSxUNITS")?;
    let site = Site::generate(networks.parse()?, units.parse()?);
    let world = World::new(&site);
    let total_units = site.networks.iter().map(|n| n.units.len()).sum::<usize>();
    println!("site {} ({total_units} units), attribute topics {}", args.site, args.attribute_topics);
    let start = held();
    let mut views = Vec::new();
    for n in &site.networks {
        let net = world.networks.get(&n.id).context("network in the world")?;
        let state: NetworkState = serde_json::from_value(render::network(net, true))?;
        let mut view = NetworkView::new(&n.id);
        view.apply_snapshot(state);
        let mut fixtures = Vec::new();
        for id in view.fixture_ids() {
            if let Some(f) = world.fixtures.get(&i64::from(id)) {
                let fixture: Fixture = serde_json::from_value(render::fixture(f))?;
                fixtures.push((id, Arc::new(fixture)));
            }
        }
        view.set_fixtures(fixtures.into_iter().collect());
        view.set_connection(Connection::Live);
        views.push(view);
    }
    let after_views = report("core: network views", start.clone(), total_units, args.sizes);
    let mut mirrors: Vec<NetMirror> =
        views.iter().enumerate().map(|(i, v)| NetMirror::new(v.clone(), format!("site-{i}"))).collect();
    let after_mirrors = report("publisher: mirrors (units shared)", after_views, total_units, args.sizes);
    let renderer = Renderer {
        layout: Layout::new("casambi"),
        discovery: Some(Discovery { prefix: "homeassistant".into(), mode: DiscoveryMode::Device, qos: 1 }),
        attribute_topics: args.attribute_topics,
        data_sensors: Default::default(),
    };
    let mut store = Store::default();
    let mut published = 0usize;
    for m in &mirrors {
        for op in plan::network_ops(&renderer, &mut store, m) {
            store.record(op.receipt());
            published += 1;
        }
    }
    let after_store = report(&format!("publisher: store ({published} topics)"), after_mirrors, total_units, args.sizes);
    // Logged datapoints: what the demo's luminaires log, one point per key and unit.
    let keys = ["dimmer", "power", "energy", "driver_temperature", "operating_hours", "status"];
    for m in &mut mirrors {
        let points: Vec<Datapoint> = m
            .view
            .units
            .keys()
            .flat_map(|id| {
                keys.iter().map(move |key| Datapoint {
                    time: chrono::Utc::now(),
                    unit: Some(*id),
                    key: (*key).to_string(),
                    value: DatapointValue::parse(if *key == "status" { "ok" } else { "12.5" }),
                })
            })
            .collect();
        m.data.take(&points);
    }
    let after_data = report("publisher: latest datapoints", after_store, total_units, args.sizes);
    let mut data_topics = 0usize;
    for m in &mirrors {
        let units: Vec<u32> = m.view.units.keys().copied().collect();
        for op in plan::data_ops(&renderer, &mut store, m, &units) {
            store.record(op.receipt());
            data_topics += 1;
        }
    }
    report(&format!("publisher: store, datapoints ({data_topics} ops)"), after_data, total_units, args.sizes);
    report("total", start, total_units, false);
    Ok(())
}
