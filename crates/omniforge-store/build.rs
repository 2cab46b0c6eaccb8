//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds `migrations/` (SQLite)
//! and `migrations-postgres/` at compile time but can only ask the compiler to watch files that
//! already exist.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-postgres");
}
