//! Builds `native/warm_ext.rs`, the warm templates' CPython extension module (see that file),
//! into `$OUT_DIR/warm_ext.so` with the same `rustc` and target as the crate; `warm/` embeds
//! it with `include_bytes!`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "native/warm_ext.rs";
    println!("cargo::rerun-if-changed={source}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("warm_ext.so");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").unwrap_or_default();
    let mut cmd = Command::new(rustc);
    cmd.args([
        "--crate-type=cdylib",
        "--crate-name=omniforge_warm_ext",
        "--edition=2024",
        "-C",
        "opt-level=2",
        "-C",
        "panic=abort",
        "-C",
        "debuginfo=0",
        "--target",
        &target,
        "-o",
    ])
    .arg(&out)
    .arg(source);
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        cmd.arg("-C").arg({
            let mut a = std::ffi::OsString::from("linker=");
            a.push(linker);
            a
        });
    }
    match cmd.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("building {source} failed: {status}"),
        Err(e) => panic!("cannot run rustc for {source}: {e}"),
    }
}
