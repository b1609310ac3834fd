//! Lays out the release binary's code so that what a running bridge executes sits together.
//!
//! Each page of code a process touches brings the 64 KiB around it into its memory: scattered
//! over the whole binary, the few megabytes a bridge runs keep most of the binary resident.
//! `link/hot-functions.txt` lists the functions a big site's bridge ran
//! (`scripts/hot_functions.sh` makes it), and the linker places them first, in that order
//! (docs/cli.md#build). Other builds and linkers link as before: the list is only a layout.
//!
//! The same builds pack their relative relocations (`-z pack-relative-relocs`) where the build
//! machine's glibc loads them (2.36 and later): the loader reads the whole relocation table at
//! start-up, and in the long form it is hundreds of kilobytes that then stay resident.
//!
//! The execution profile optimised builds read (`link/pgo.profdata`, through
//! `link/rustc-with-profile`) is no input Cargo knows of: watching it here rebuilds this crate,
//! where the bridge's hot code is, when the profile changes.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIST: &str = "link/hot-functions.txt";

fn main() {
    println!("cargo::rerun-if-changed={LIST}");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/pgo.profdata");
    // A linker chosen in Cargo's configuration reaches this script as RUSTC_LINKER; one chosen by
    // the environment is this variable, which must decide again when it changes.
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let Some(list) = ordering_list() else { return };
    // Names the list has and this build lacks (a function inlined away, a dependency upgraded)
    // are expected; the rest of the list still applies.
    let mut args = vec![format!("--symbol-ordering-file={list}"), "--no-warn-symbol-ordering".to_string()];
    // A binary with packed relocations names glibc 2.36 as a need: built where an older glibc
    // is, it would not start there. A cross build links another machine's glibc: left as is.
    if env::var("HOST").ok() == env::var("TARGET").ok() && glibc_at_least(2, 36) {
        args.extend(["-z".to_string(), "pack-relative-relocs".to_string()]);
    }
    for arg in args {
        for kind in ["bins", "examples"] {
            println!("cargo::rustc-link-arg-{kind}=-Xlinker");
            println!("cargo::rustc-link-arg-{kind}={arg}");
        }
    }
}

/// Whether the build machine's glibc is `major.minor` or later (`getconf GNU_LIBC_VERSION`
/// prints `glibc 2.36`); false when it cannot tell.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.trim().strip_prefix("glibc ").unwrap_or_default().split('.');
    let mut number = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (number(), number()) {
        (Some(a), Some(b)) => out.status.success() && (a, b) >= (major, minor),
        _ => false,
    }
}

/// The list's path, when this build links with LLD: optimised, for x86_64 Linux with glibc,
/// by a rustc that links there with the LLD it ships (1.90 and later; a distribution's rustc
/// may ship none and link with the system's linker, which knows no ordering file), and with no
/// linker of the user's choice (configured or in the flags).
fn ordering_list() -> Option<String> {
    let var = |name: &str| env::var(name).unwrap_or_default();
    let own_linker = env::var_os("RUSTC_LINKER").is_some() || var("CARGO_ENCODED_RUSTFLAGS").contains("linker");
    let lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && !own_linker
        && version_check::is_min_version("1.90.0").unwrap_or(false)
        && ships_lld(&var("RUSTC"));
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join(LIST);
    (var("PROFILE") == "release" && lld && list.is_file()).then(|| list.display().to_string())
}

/// Whether the toolchain of `rustc` has its own LLD for x86_64 Linux.
fn ships_lld(rustc: &str) -> bool {
    let rustc = if rustc.is_empty() { "rustc" } else { rustc };
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else { return false };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success() && sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld/ld.lld").is_file()
}
