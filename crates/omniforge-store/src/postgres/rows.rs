//! The column helpers and error mapping the table files use: the backend-neutral ones of
//! [`crate::sql`] and [`crate::rules`], under the names the PostgreSQL files import.

pub(super) use crate::rules::{checked_i64, corrupt, invalid, now_ms, to_json};
pub(super) use crate::sql::{col, db, get_json, get_u32, get_u64, opt_json};
