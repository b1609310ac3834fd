//! The sites that need no file: the built-in demo site (two networks with a mix of every kind of
//! unit) and generated sites of any size (`--generate NETWORKSxUNITS`, the benchmarks' sites).

use super::*;
use serde_json::{Value, json};

impl Site {
    /// The built-in demo site: two networks ("Home" and "Office") with dimmable, tunable-white and
    /// colour luminaires, presence and lux sensors, a switch, an offline unit, scenes and groups.
    pub fn demo() -> Site {
        let home = Network {
            id: "7bd1f2a64c3e4d0f9a8b1c2d3e4f5a6b".into(),
            name: "Home".into(),
            address: "a1b2c3d4e5f6".into(),
            timezone: "Europe/Helsinki".into(),
            gateway: "Kitchen tablet".into(),
            kind: "OPEN".into(),
            grade: "EVOLUTION".into(),
            revision: 42,
            dim_level: 1.0,
            gateway_online: true,
            credentials: demo_network_credentials(),
            units: vec![
                unit(1, "Kitchen ceiling", "Luminaire", 1001, 1, true, vec![dimmer(0.8)]),
                unit(2, "Küche Spots", "Luminaire", 1002, 1, true, vec![dimmer(0.5), cct(2700.0, 2700.0, 6500.0)]),
                unit(
                    3,
                    "Living room lamp",
                    "Luminaire",
                    1003,
                    2,
                    false,
                    vec![dimmer(0.0), colorsource("XY"), color_xy(0.3227, 0.329)],
                ),
                unit(4, "Hallway presence", "Sensor", 2001, 0, false, vec![presence("absent")]),
                unit(5, "Garden lux", "Sensor", 2002, 0, false, vec![lux(412.0)]),
                unit(6, "Entrance switch", "BatterySwitch", 2003, 0, false, vec![json!({"type": "Switch"})]),
                Unit { online: false, ..unit(7, "Garage light", "Luminaire", 1001, 0, false, vec![dimmer(0.0)]) },
                unit(8, "Living room floor", "Luminaire", 1004, 2, true, vec![json!({"type": "OnOff", "value": 1.0})]),
            ],
            scenes: vec![
                scene(1, None, "Evening", &[(1, 0.4), (2, 0.3), (3, 0.6)]),
                scene(2, None, "Cooking", &[(1, 1.0), (2, 1.0)]),
                // The service's scene map key need not equal the scene id.
                scene(5, Some("3"), "Night light", &[(7, 0.1)]),
            ],
            groups: vec![
                Group { id: 1, name: "Kitchen".into(), position: 1, units: vec![1, 2] },
                Group { id: 2, name: "Living room".into(), position: 2, units: vec![3, 8] },
            ],
            photos: vec![Photo {
                name: "Ground floor".into(),
                image: "photo-home-1".into(),
                position: 0,
                size: None,
                corrupt: false,
            }],
        };
        let office = Network {
            id: "c0ffee00aa11bb22cc33dd44ee55ff66".into(),
            name: "Office".into(),
            address: "0a1b2c3d4e5f".into(),
            timezone: "Europe/Berlin".into(),
            gateway: "Reception gateway".into(),
            kind: "OPEN".into(),
            grade: "EVOLUTION".into(),
            revision: 7,
            dim_level: 0.9,
            gateway_online: true,
            credentials: demo_network_credentials(),
            units: vec![
                unit(1, "Desk 1", "Luminaire", 1002, 0, true, vec![dimmer(0.7), cct(4000.0, 2700.0, 6500.0)]),
                unit(2, "Desk 2", "Luminaire", 1002, 0, true, vec![dimmer(0.7), cct(4000.0, 2700.0, 6500.0)]),
                unit(3, "Meeting room", "Luminaire", 1001, 3, false, vec![dimmer(0.0)]),
                unit(4, "Meeting room presence", "Sensor", 2001, 0, false, vec![presence("present")]),
                unit(5, "Window lux", "Sensor", 2002, 0, false, vec![lux(820.0)]),
            ],
            scenes: vec![
                scene(1, None, "Work", &[(1, 1.0), (2, 1.0), (3, 0.8)]),
                scene(2, None, "Presentation", &[(3, 0.3)]),
            ],
            groups: vec![Group { id: 3, name: "Meeting".into(), position: 1, units: vec![3] }],
            photos: vec![],
        };
        let mut site = Site {
            api_keys: vec![demo_key()],
            users: vec![demo_user()],
            fixtures: demo_fixtures(),
            networks: vec![home, office],
        };
        site.networks[0].units[0].image = Some("unit-image-1".into());
        site.networks[0].scenes[0].active = false;
        site
    }

    /// A generated site of `networks` × `units_per_network` units, with a mix of unit kinds, a
    /// group and scene per ten units, using the demo key and credentials. Deterministic.
    pub fn generate(networks: usize, units_per_network: usize) -> Site {
        let mut nets = Vec::with_capacity(networks);
        for n in 0..networks {
            let mut units = Vec::with_capacity(units_per_network);
            for u in 1..=units_per_network as i64 {
                let group = (u - 1) / 10 + 1;
                let (kind, fixture, controls) = match u % 10 {
                    0 => ("Sensor", 2001, vec![presence("absent")]),
                    5 => ("Sensor", 2002, vec![lux(100.0 + u as f64)]),
                    3 | 7 => ("Luminaire", 1002, vec![dimmer(0.5), cct(3000.0, 2700.0, 6500.0)]),
                    9 => ("Luminaire", 1003, vec![dimmer(0.5), colorsource("XY"), color_xy(0.4, 0.4)]),
                    _ => ("Luminaire", 1001, vec![dimmer(0.5)]),
                };
                let mut unit = unit(u, &format!("Unit {u}"), kind, fixture, 0, kind == "Luminaire", controls);
                unit.address = format!("{:06x}{:06x}", n, u);
                if kind == "Luminaire" {
                    unit.group = group;
                }
                units.push(unit);
            }
            let group_count = units_per_network.div_ceil(10) as i64;
            let groups = (1..=group_count)
                .map(|g| Group {
                    id: g,
                    name: format!("Group {g}"),
                    position: g,
                    units: units.iter().filter(|u| u.group == g).map(|u| u.id).collect(),
                })
                .collect();
            let scenes = (1..=group_count.min(20))
                .map(|s| Scene {
                    units: units
                        .iter()
                        .filter(|u| u.kind == "Luminaire" && (u.group == s || s == 1))
                        .map(|u| SceneUnit { id: u.id, level: 0.6 })
                        .collect(),
                    ..scene(s, None, &format!("Scene {s}"), &[])
                })
                .collect();
            nets.push(Network {
                id: format!("{:032x}", 0x5eed_0000_u64 + n as u64),
                name: format!("Site {}", n + 1),
                address: format!("{:012x}", n),
                timezone: default_timezone(),
                gateway: default_gateway(),
                kind: default_network_type(),
                grade: default_grade(),
                revision: 1,
                dim_level: 1.0,
                gateway_online: true,
                credentials: demo_network_credentials(),
                units,
                scenes,
                groups,
                photos: vec![],
            });
        }
        Site {
            api_keys: vec![ApiKey { requests_per_minute: 100_000, concurrent_requests: 64, ..demo_key() }],
            users: vec![demo_user()],
            fixtures: demo_fixtures(),
            networks: nets,
        }
    }
}

fn demo_key() -> ApiKey {
    ApiKey {
        key: DEMO_API_KEY.into(),
        enabled: true,
        requests_per_minute: default_rpm(),
        concurrent_requests: default_concurrent(),
        max_sockets: default_sockets(),
    }
}

fn demo_user() -> User {
    User {
        email: DEMO_USER_EMAIL.into(),
        password: DEMO_PASSWORD.into(),
        site_id: default_site_id(),
        site_name: default_site_name(),
        networks: vec![],
    }
}

fn demo_network_credentials() -> Credentials {
    Credentials { email: DEMO_NETWORK_EMAIL.into(), password: DEMO_PASSWORD.into() }
}

fn demo_fixtures() -> Vec<Fixture> {
    let control = |kind: &str, id: i64| json!({"type": kind, "id": id, "readonly": false});
    vec![
        Fixture {
            id: 1001,
            kind: "Driver".into(),
            vendor: "Lumen Works".into(),
            model: "Dim 40".into(),
            icon: true,
            controls: vec![control("dimmer", 0)],
        },
        Fixture {
            id: 1002,
            kind: "Driver".into(),
            vendor: "Lumen Works".into(),
            model: "TW Spot 2700-6500".into(),
            icon: true,
            controls: vec![
                control("dimmer", 0),
                json!({"type": "temperature", "id": 1, "readonly": false, "min": 2700, "max": 6500, "unit": "K"}),
            ],
        },
        Fixture {
            id: 1003,
            kind: "Driver".into(),
            vendor: "Chroma".into(),
            model: "RGB Bulb".into(),
            icon: false,
            controls: vec![control("dimmer", 0), control("rgb", 1), control("colorsource", 2)],
        },
        Fixture {
            id: 1004,
            kind: "Driver".into(),
            vendor: "Plug Co".into(),
            model: "Relay".into(),
            icon: false,
            controls: vec![control("onoff", 0)],
        },
        Fixture {
            id: 2001,
            kind: "Sensor".into(),
            vendor: "Sense".into(),
            model: "PIR 360".into(),
            icon: true,
            controls: vec![json!({"type": "presence", "id": 0, "readonly": true})],
        },
        Fixture {
            id: 2002,
            kind: "Sensor".into(),
            vendor: "Sense".into(),
            model: "Lux 1".into(),
            icon: false,
            controls: vec![json!({"type": "lux", "id": 0, "readonly": true, "unit": "lx", "valueType": "FLOAT"})],
        },
        Fixture {
            id: 2003,
            kind: "BatterySwitch".into(),
            vendor: "Sense".into(),
            model: "4-button switch".into(),
            icon: false,
            controls: vec![json!({"type": "button", "id": 0, "readonly": true, "buttonLabel": "1"})],
        },
    ]
}

fn unit(id: i64, name: &str, kind: &str, fixture: i64, group: i64, on: bool, controls: Vec<Value>) -> Unit {
    Unit {
        id,
        name: name.into(),
        address: format!("d0c0ffee{id:04x}"),
        kind: kind.into(),
        fixture,
        firmware: default_firmware(),
        group,
        position: if group > 0 { 0 } else { id },
        image: None,
        online: true,
        on,
        controls,
    }
}

fn scene(id: i64, key: Option<&str>, name: &str, units: &[(i64, f64)]) -> Scene {
    Scene {
        id,
        key: key.map(str::to_string),
        name: name.into(),
        position: id,
        icon: 0,
        color: default_scene_color(),
        active: false,
        units: units.iter().map(|&(id, level)| SceneUnit { id, level }).collect(),
    }
}

fn dimmer(value: f64) -> Value {
    json!({"type": "Dimmer", "name": "dimmer0", "value": value})
}
fn cct(value: f64, min: f64, max: f64) -> Value {
    json!({"type": "CCT", "name": "temperature", "min": min, "max": max, "value": value,
           "level": (value - min) / (max - min), "tw": value})
}
fn colorsource(source: &str) -> Value {
    json!({"type": "Colorsource", "source": source})
}
fn color_xy(x: f64, y: f64) -> Value {
    json!({"type": "Color", "name": "rgb", "x": x, "y": y, "hue": 0.0, "sat": 0.0, "rgb": "rgb(255, 255, 255)"})
}
fn presence(status: &str) -> Value {
    json!({"type": "Presence", "status": status})
}
fn lux(value: f64) -> Value {
    json!({"type": "Lux", "value": value, "level": (value / 1000.0).min(1.0)})
}
