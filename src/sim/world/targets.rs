//! The simulated `controlUnit`/`controlScene`/… targets: `targetControls` checked into [`Target`]s
//! (rejections as the service words them), a target applied to a unit's controls, and the
//! helpers that read and round a control's values (also used by the renderer and activity).

use super::*;
/// One checked entry of `targetControls`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Target {
    Dimmer(f64),
    OnOff(bool),
    Temperature(f64),
    Source(String),
    Hue { hue: f64, sat: f64 },
    Rgb(u8, u8, u8),
    Xy(f64, f64),
    White(f64),
    Vertical(f64),
}

pub(super) fn check_level(level: f64) -> Result<(), ControlError> {
    if (0.0..=1.0).contains(&level) {
        Ok(())
    } else {
        Err(ControlError::InvalidData(format!("level {level} outside 0..1")))
    }
}

fn number(obj: &Map<String, Value>, control: &str, field: &str) -> Result<f64, ControlError> {
    match obj.get(field) {
        Some(Value::Number(n)) => {
            n.as_f64().ok_or_else(|| ControlError::InvalidValueType(format!("{control}.{field}")))
        }
        Some(_) => Err(ControlError::InvalidValueType(format!("{control}.{field} must be a number"))),
        None => Err(ControlError::InvalidData(format!("{control}.{field} missing"))),
    }
}

fn unit_interval(obj: &Map<String, Value>, control: &str, field: &str) -> Result<f64, ControlError> {
    let v = number(obj, control, field)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(ControlError::InvalidData(format!("{control}.{field} {v} outside 0..1")))
    }
}

/// Parses `targetControls` fully before anything is applied.
pub(super) fn parse_targets(targets: &Map<String, Value>) -> Result<Vec<Target>, ControlError> {
    let mut out = Vec::with_capacity(targets.len());
    for (name, value) in targets {
        let obj =
            value.as_object().ok_or_else(|| ControlError::InvalidValueType(format!("{name} must be an object")))?;
        let target = match name.as_str() {
            "Dimmer" => Target::Dimmer(unit_interval(obj, name, "value")?),
            "OnOff" => Target::OnOff(number(obj, name, "value")? > 0.5),
            "ColorTemperature" => {
                let k = number(obj, name, "value")?;
                if !(1000.0..=20000.0).contains(&k) {
                    return Err(ControlError::InvalidData(format!("ColorTemperature {k} K out of range")));
                }
                Target::Temperature(k)
            }
            "Colorsource" => match obj.get("source") {
                Some(Value::String(s)) if matches!(s.as_str(), "TW" | "RGB" | "XY") => Target::Source(s.clone()),
                Some(Value::String(s)) => return Err(ControlError::InvalidData(format!("unknown Colorsource {s}"))),
                _ => return Err(ControlError::InvalidValueType("Colorsource.source must be a string".into())),
            },
            "RGB" => match obj.get("rgb") {
                Some(Value::String(s)) => {
                    let (r, g, b) = crate::color::parse_rgb(s)
                        .ok_or_else(|| ControlError::InvalidData(format!("RGB.rgb {s:?} is not rgb(r, g, b)")))?;
                    Target::Rgb(r, g, b)
                }
                Some(_) => return Err(ControlError::InvalidValueType("RGB.rgb must be a string".into())),
                None => Target::Hue { hue: unit_interval(obj, name, "hue")?, sat: unit_interval(obj, name, "sat")? },
            },
            "XY" => Target::Xy(unit_interval(obj, name, "x")?, unit_interval(obj, name, "y")?),
            "White" => Target::White(unit_interval(obj, name, "value")?),
            "Vertical" => Target::Vertical(unit_interval(obj, name, "value")?),
            other => return Err(ControlError::InvalidData(format!("unknown control {other}"))),
        };
        out.push(target);
    }
    Ok(out)
}

impl Target {
    pub(super) fn apply(&self, u: &mut UnitTruth) {
        let controls = &mut u.def.controls;
        match self {
            Target::Dimmer(v) => {
                if has(controls, "Dimmer") {
                    set(controls, "Dimmer", "value", *v);
                    if *v > 0.0 {
                        u.last_level = *v;
                    }
                }
                u.def.on = *v > 0.0;
            }
            Target::OnOff(on) => {
                u.def.on = *on;
                if has(controls, "OnOff") {
                    set(controls, "OnOff", "value", if *on { 1.0 } else { 0.0 });
                }
                if has(controls, "Dimmer") {
                    set(controls, "Dimmer", "value", if *on { u.last_level } else { 0.0 });
                }
            }
            Target::Temperature(k) => {
                if let Some(cct) = find(controls, "CCT") {
                    let min = cct.get("min").and_then(Value::as_f64).unwrap_or(2700.0);
                    let max = cct.get("max").and_then(Value::as_f64).unwrap_or(6500.0);
                    let k = k.clamp(min, max);
                    let level = if max > min { (k - min) / (max - min) } else { 0.0 };
                    set(controls, "CCT", "value", k);
                    set(controls, "CCT", "tw", k);
                    set(controls, "CCT", "level", level);
                }
            }
            Target::Source(source) => {
                if let Some(obj) = find(controls, "Colorsource").and_then(Value::as_object_mut) {
                    obj.insert("source".into(), Value::String(source.clone()));
                }
            }
            Target::Hue { hue, sat } => {
                let (r, g, b) = crate::color::hsv_to_rgb8(*hue, *sat);
                set_color(controls, r, g, b);
            }
            Target::Rgb(r, g, b) => set_color(controls, *r, *g, *b),
            Target::Xy(x, y) => {
                let (r, g, b) = crate::color::xy_to_rgb8(*x, *y);
                set_color(controls, r, g, b);
                set(controls, "Color", "x", *x);
                set(controls, "Color", "y", *y);
            }
            Target::White(v) => set(controls, "White", "value", *v),
            Target::Vertical(v) => set(controls, "Vertical", "value", *v),
        }
    }
}

fn set_color(controls: &mut [Value], r: u8, g: u8, b: u8) {
    let (hue, sat) = crate::color::rgb8_to_hue_sat(r, g, b);
    let (x, y) = crate::color::rgb8_to_xy(r, g, b);
    set(controls, "Color", "hue", hue);
    set(controls, "Color", "sat", sat);
    set(controls, "Color", "x", x);
    set(controls, "Color", "y", y);
    if let Some(obj) = find(controls, "Color").and_then(Value::as_object_mut) {
        obj.insert("rgb".into(), Value::String(format!("rgb({r}, {g}, {b})")));
    }
}

fn find<'a>(controls: &'a mut [Value], kind: &str) -> Option<&'a mut Value> {
    controls.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn has(controls: &[Value], kind: &str) -> bool {
    controls.iter().any(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// Sets a numeric field of the first control of a type; units without that control are unchanged.
fn set(controls: &mut [Value], kind: &str, field: &str, value: f64) {
    if let (Some(obj), Some(n)) =
        (find(controls, kind).and_then(Value::as_object_mut), serde_json::Number::from_f64(round6(value)))
    {
        obj.insert(field.into(), Value::Number(n));
    }
}

/// Rounds to 6 decimals, so values survive a JSON round trip unchanged.
pub(crate) fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// Reads a numeric field of the first control of a type.
pub(crate) fn control_value(controls: &[Value], kind: &str, field: &str) -> Option<f64> {
    controls
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        .and_then(|c| c.get(field))
        .and_then(Value::as_f64)
}
