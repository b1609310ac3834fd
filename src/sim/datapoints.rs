//! Logged datapoints (`GET /datapoints/networks/{id}/datapoints`): the query rules of the real
//! service and a simulated history to answer from.
//!
//! - [`query`]: the query string and its rules, as the service applies them.
//! - [`history`]: the simulated history a query is answered from.

mod energy;
mod history;
mod query;

pub use energy::EnergyLedger;
pub use history::*;
pub use query::*;

/// Spacing of the simulated history.
pub const SLOT_MS: i64 = 15 * 60 * 1000;
/// How long datapoints are kept (the real service: 60 days).
pub const RETENTION_MS: i64 = 60 * 24 * 3600 * 1000;
/// Limit applied when the query gives none.
pub const DEFAULT_LIMIT: u32 = 10_000;
/// Largest allowed `limit`.
pub const MAX_LIMIT: u32 = 100_000;

/// The string-based datapoint type filters of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// Sensor readings (presence, lux, battery).
    Sensors,
    /// Vendor-specific values.
    Vendor,
    /// Control values (dimmer, colour temperature, on/off).
    Control,
    /// Energy use.
    Energy,
    /// Device details.
    Details,
    /// Unit status.
    Status,
}

impl DataType {
    /// Parses a `dataType` list entry (lowercase, as the service spells them).
    pub fn parse(text: &str) -> Option<DataType> {
        Some(match text {
            "sensors" => DataType::Sensors,
            "vendor" => DataType::Vendor,
            "control" => DataType::Control,
            "energy" => DataType::Energy,
            "details" => DataType::Details,
            "status" => DataType::Status,
            _ => return None,
        })
    }
}

/// A key of the simulated history (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// `dimmer`
    Dimmer,
    /// `cct`
    Cct,
    /// `onoff`
    OnOff,
    /// `presence`
    Presence,
    /// `lux`
    Lux,
    /// `battery_level`
    BatteryLevel,
    /// `power`
    Power,
    /// `energy`
    Energy,
    /// `driver_temperature`
    DriverTemperature,
    /// `operating_hours`
    OperatingHours,
    /// `status`
    Status,
}

impl Key {
    /// The key's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Key::Dimmer => "dimmer",
            Key::Cct => "cct",
            Key::OnOff => "onoff",
            Key::Presence => "presence",
            Key::Lux => "lux",
            Key::BatteryLevel => "battery_level",
            Key::Power => "power",
            Key::Energy => "energy",
            Key::DriverTemperature => "driver_temperature",
            Key::OperatingHours => "operating_hours",
            Key::Status => "status",
        }
    }

    /// The `dataType` the key belongs to.
    pub fn data_type(self) -> DataType {
        match self {
            Key::Dimmer | Key::Cct | Key::OnOff => DataType::Control,
            Key::Presence | Key::Lux | Key::BatteryLevel => DataType::Sensors,
            Key::Power | Key::Energy => DataType::Energy,
            Key::DriverTemperature => DataType::Vendor,
            Key::OperatingHours => DataType::Details,
            Key::Status => DataType::Status,
        }
    }
}

#[cfg(test)]
mod tests;
