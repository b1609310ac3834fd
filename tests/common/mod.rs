//! Shared helpers of the integration tests, one concern a module; their names are re-exported
//! here, so a test names them `common::Mosquitto`, `common::Watcher` and so on.
#![allow(dead_code)]

pub mod app;
pub mod golden;
pub mod logs;
pub mod mosquitto;
pub mod process;
pub mod publisher;
pub mod tls;
pub mod views;
pub mod watcher;
pub mod web_rig;

// Each test binary takes some of these names, none takes all.
#[allow(unused_imports)]
pub use app::*;
#[allow(unused_imports)]
pub use golden::*;
#[allow(unused_imports)]
pub use mosquitto::*;
#[allow(unused_imports)]
pub use publisher::*;
#[allow(unused_imports)]
pub use views::*;
#[allow(unused_imports)]
pub use watcher::*;
