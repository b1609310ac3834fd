//! casambi2mqtt: exports a lighting network cloud service's state to MQTT with Home Assistant
//! discovery, and ships a simulated cloud service that speaks the same protocol.
//!
//! The binary (`src/main.rs`) is a thin command-line shell over this library; see
//! `ARCHITECTURE.md` for the map of the modules.

pub mod app;
pub mod bridge;
#[cfg(feature = "embedded-broker")]
pub mod broker;
pub mod check;
pub mod cloud;
pub mod color;
pub mod commands;
pub mod config;
pub mod health;
pub mod json_object;
pub mod log_filter;
pub mod metrics;
pub mod mqtt;
pub mod sim;
pub mod wake_batch;
pub mod web;
