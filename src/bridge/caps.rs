//! What a unit can do, from its controls merged with its fixture's controls.
//!
//! The merge matters for offline units: the cloud omits their controls, but their fixture still
//! says what they are, so Home Assistant gets the right entity (and keeps it) whatever the unit's
//! current reachability.

use super::state::is_switch_type;
use crate::cloud::model::{Control, Fixture, FixtureControlType, UnitState};

/// A unit's capabilities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// Dimmable (`Dimmer` / fixture `dimmer`).
    pub dimmer: bool,
    /// Switchable only (`OnOff` / fixture `onoff`).
    pub onoff: bool,
    /// Tunable white (`CCT` / fixture `temperature`).
    pub cct: bool,
    /// Colour-temperature range in kelvin, from the unit's `CCT` control.
    pub kelvin: Option<(u32, u32)>,
    /// Colour (`Color`/`Colorsource` / fixture `rgb`/`colorsource`).
    pub color: bool,
    /// Presence sensor.
    pub presence: bool,
    /// Light sensor.
    pub lux: bool,
    /// Switch or push button.
    pub switch: bool,
    /// The unit's type says luminaire or driver even when nothing else is known.
    pub luminaire_type: bool,
}

impl Caps {
    /// The capabilities of `unit`, merged with those of its fixture (if known).
    pub fn of(unit: &UnitState, fixture: Option<&Fixture>) -> Caps {
        let mut c = Caps::default();
        for control in unit.controls.iter().flatten() {
            match control {
                Control::Dimmer(_) => c.dimmer = true,
                Control::OnOff(_) => c.onoff = true,
                Control::Cct(cct) => {
                    c.cct = true;
                    let (lo, hi) = (cct.min.min(cct.max), cct.min.max(cct.max));
                    if lo > 0.0 && hi > lo {
                        c.kelvin = Some((lo.round() as u32, hi.round() as u32));
                    }
                }
                Control::Color(_) | Control::Colorsource(_) => c.color = true,
                Control::Presence(_) => c.presence = true,
                Control::Lux(_) => c.lux = true,
                Control::Switch(_) => c.switch = true,
                _ => {}
            }
        }
        // A `Switch` control was seen above; the type is the other half of `is_switch`.
        c.switch |= unit.unit_type.as_deref().is_some_and(is_switch_type);
        c.luminaire_type = luminaire_type(unit);
        if let Some(f) = fixture {
            for fc in &f.controls {
                match &fc.control_type {
                    FixtureControlType::Dimmer => c.dimmer = true,
                    FixtureControlType::Onoff => c.onoff = true,
                    FixtureControlType::Temperature => c.cct = true,
                    FixtureControlType::Rgb | FixtureControlType::Colorsource => c.color = true,
                    FixtureControlType::Other(t) if t == "presence" => c.presence = true,
                    FixtureControlType::Other(t) if t == "lux" => c.lux = true,
                    _ => {}
                }
            }
            c.presence |= f.is_presence_sensor == Some(true);
            c.lux |= f.is_light_sensor == Some(true);
            c.switch |= f.is_switch == Some(true) || f.fixture_type.as_deref().is_some_and(is_switch_type);
            c.luminaire_type |= f.is_luminaire == Some(true);
        }
        c
    }

    /// `Caps::of(unit, fixture()).is_light()`, answered at the unit's type when it says luminaire
    /// or driver. A group's JSON asks this of every member on each change of one of them, and
    /// most members answer there, without their fixture being looked up.
    pub fn light_of<'f>(unit: &UnitState, fixture: impl FnOnce() -> Option<&'f Fixture>) -> bool {
        luminaire_type(unit) || Caps::of(unit, fixture()).is_light()
    }

    /// Whether the unit is a light (gets a `light` entity and an ON/OFF `state`).
    pub fn is_light(&self) -> bool {
        self.dimmer || self.onoff || self.cct || self.color || self.luminaire_type
    }

    /// Home Assistant `supported_color_modes`: `hs` (+ `color_temp`) for colour (the cloud's own
    /// model, so a colour picked in HA comes back as picked), `color_temp` for
    /// tunable white, `brightness` for dimmers, else `onoff`. `onoff` and `brightness` are never
    /// combined with anything (HA rejects that). A constant list: the unit JSON asks for it on
    /// every change of a light.
    pub fn color_modes(&self) -> &'static [&'static str] {
        match (self.color, self.cct, self.dimmer) {
            (true, true, _) => &["color_temp", "hs"],
            (true, false, _) => &["hs"],
            (false, true, _) => &["color_temp"],
            (false, false, true) => &["brightness"],
            (false, false, false) => &["onoff"],
        }
    }
}

/// The unit's type says luminaire or driver.
fn luminaire_type(unit: &UnitState) -> bool {
    matches!(unit.unit_type.as_deref(), Some("Luminaire" | "Driver"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(json: &str) -> UnitState {
        serde_json::from_str(json).unwrap()
    }

    fn fixture(json: &str) -> Fixture {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn colour_modes_are_exclusive_and_ordered() {
        let cases = [
            (r#"[{"type":"Dimmer","value":1}]"#, vec!["brightness"]),
            (r#"[{"type":"OnOff","value":1}]"#, vec!["onoff"]),
            (r#"[{"type":"Dimmer","value":1},{"type":"CCT","value":3000,"min":2700,"max":6500}]"#, vec!["color_temp"]),
            (
                r#"[{"type":"Dimmer","value":1},{"type":"Colorsource","source":"XY"},{"type":"Color","x":0.3,"y":0.3}]"#,
                vec!["hs"],
            ),
            (
                r#"[{"type":"Dimmer","value":1},{"type":"Color","hue":0.1,"sat":1},{"type":"CCT","value":3000,"min":2700,"max":6500}]"#,
                vec!["color_temp", "hs"],
            ),
        ];
        for (controls, modes) in cases {
            let caps = Caps::of(&unit(&format!(r#"{{"id":1,"type":"Luminaire","controls":{controls}}}"#)), None);
            let got = caps.color_modes();
            assert_eq!(got, modes, "{controls}");
            if got.contains(&"onoff") || got.contains(&"brightness") {
                assert_eq!(got.len(), 1);
            }
        }
    }

    #[test]
    fn offline_unit_takes_its_fixture_capabilities() {
        let f = fixture(r#"{"id":1002,"controls":[{"type":"dimmer"},{"type":"temperature","min":2700,"max":6500}]}"#);
        let caps = Caps::of(&unit(r#"{"id":1,"online":false}"#), Some(&f));
        assert!(caps.is_light());
        assert_eq!(caps.color_modes(), ["color_temp"]);
        let sensor = fixture(r#"{"id":2001,"type":"Sensor","controls":[{"type":"presence","readonly":true}]}"#);
        let caps = Caps::of(&unit(r#"{"id":4,"type":"Sensor"}"#), Some(&sensor));
        assert!(caps.presence && !caps.is_light());
    }

    #[test]
    fn light_of_agrees_with_the_full_capabilities() {
        let units = [
            r#"{"id":1,"type":"Luminaire"}"#,
            r#"{"id":2,"type":"Driver"}"#,
            r#"{"id":3,"type":"Sensor","controls":[{"type":"Presence","status":"absent"}]}"#,
            r#"{"id":4,"controls":[{"type":"OnOff","value":1}]}"#,
            r#"{"id":5,"controls":[{"type":"Colorsource","source":"XY"}]}"#,
            r#"{"id":6,"controls":[{"type":"Lux","value":10}]}"#,
            r#"{"id":7,"type":"Switch","controls":[{"type":"Switch"}]}"#,
            r#"{"id":8,"online":false}"#,
        ];
        let fixtures = [
            None,
            Some(fixture(r#"{"id":1,"controls":[{"type":"dimmer"}]}"#)),
            Some(fixture(r#"{"id":2,"controls":[{"type":"rgb"}]}"#)),
            Some(fixture(r#"{"id":3,"isLuminaire":true,"controls":[]}"#)),
            Some(fixture(r#"{"id":4,"type":"Sensor","controls":[{"type":"presence"},{"type":"lux"}]}"#)),
        ];
        let mut lights = 0;
        for u in units.map(unit) {
            for f in &fixtures {
                let full = Caps::of(&u, f.as_ref()).is_light();
                assert_eq!(Caps::light_of(&u, || f.as_ref()), full, "unit {} with fixture {f:?}", u.id);
                lights += usize::from(full);
            }
        }
        assert!(lights > 0 && lights < units.len() * fixtures.len(), "both answers are covered");
    }

    #[test]
    fn kelvin_range_comes_from_the_cct_control() {
        let u = unit(r#"{"id":1,"controls":[{"type":"CCT","value":3000,"min":2200,"max":5000}]}"#);
        assert_eq!(Caps::of(&u, None).kelvin, Some((2200, 5000)));
    }
}
