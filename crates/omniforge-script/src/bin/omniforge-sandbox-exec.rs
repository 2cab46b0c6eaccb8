//! The Landlock helper on its own: `omniforge-sandbox-exec __omniforge-sandbox-exec [--ro P]...
//! [--rw P]... [--no-net] -- PROGRAM ARGS...`. The `omniforge` binary embeds the same helper
//! (its runners use it); this one serves runners that live in other programs, such as this
//! crate's tests and examples.

fn main() {
    omniforge_script::main_if_helper();
    eprintln!(
        "usage: omniforge-sandbox-exec {} [--ro PATH]... [--rw PATH]... [--no-net] -- PROGRAM ARGS...",
        omniforge_script::HELPER_ARG
    );
    std::process::exit(2);
}
