//! The seam between the shared engine and `sqlx`: statements with their arguments ([`Q`]),
//! rows of plain values ([`Row`]), and the [`Conn`] trait that runs them on a connection or a
//! transaction of either backend.
//!
//! Arguments and column values are a small closed set of types ([`Arg`], [`Value`]: integers,
//! text, bytes, booleans, each nullable), the only ones the schema uses, so one implementation
//! (the `sqlx_conn!` macro below, expanded for SQLite and for PostgreSQL) binds and decodes for
//! both backends, and the engine's code never names a backend's type. SQL text is the same for
//! both wherever the two dialects agree: `$N` parameters (which sqlx's SQLite driver takes as
//! positional), `ON CONFLICT`, `RETURNING`, `TRUE`/`FALSE`, `CASE` instead of SQLite's two-argument
//! `max`.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{DatabaseError, StoreError};
use crate::validate::{corrupt, invalid};

/// One statement argument.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    /// An integer (`INTEGER` / `BIGINT`).
    Int(Option<i64>),
    /// Text.
    Text(Option<Cow<'a, str>>),
    /// Bytes (`BLOB` / `BYTEA`).
    Bytes(Option<Cow<'a, [u8]>>),
    /// A boolean (`INTEGER` 0/1 on SQLite, `BOOLEAN` on PostgreSQL).
    Bool(Option<bool>),
}

macro_rules! arg_from {
    ($($t:ty => |$v:ident| $e:expr;)*) => {
        $(impl<'a> From<$t> for Arg<'a> {
            fn from($v: $t) -> Arg<'a> {
                $e
            }
        })*
    };
}

arg_from! {
    i64 => |v| Arg::Int(Some(v));
    Option<i64> => |v| Arg::Int(v);
    u32 => |v| Arg::Int(Some(i64::from(v)));
    Option<u32> => |v| Arg::Int(v.map(i64::from));
    bool => |v| Arg::Bool(Some(v));
    Option<bool> => |v| Arg::Bool(v);
    &'a str => |v| Arg::Text(Some(Cow::Borrowed(v)));
    &'a String => |v| Arg::Text(Some(Cow::Borrowed(v.as_str())));
    String => |v| Arg::Text(Some(Cow::Owned(v)));
    Option<&'a str> => |v| Arg::Text(v.map(Cow::Borrowed));
    Option<String> => |v| Arg::Text(v.map(Cow::Owned));
    &'a [u8] => |v| Arg::Bytes(Some(Cow::Borrowed(v)));
    &'a Vec<u8> => |v| Arg::Bytes(Some(Cow::Borrowed(v.as_slice())));
    Option<&'a [u8]> => |v| Arg::Bytes(v.map(Cow::Borrowed));
}

/// One column value of a [`Row`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// SQL `NULL`.
    Null,
    /// Any integer column.
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A boolean (PostgreSQL; SQLite has integers).
    Bool(bool),
}

/// A type a column decodes into; `None` when the value has another type.
pub(crate) trait FromValue: Sized {
    /// The value as `Self`.
    fn from_value(value: Value) -> Option<Self>;
}

impl FromValue for i64 {
    fn from_value(value: Value) -> Option<i64> {
        match value {
            Value::Int(v) => Some(v),
            _ => None,
        }
    }
}

impl FromValue for bool {
    fn from_value(value: Value) -> Option<bool> {
        match value {
            Value::Bool(b) => Some(b),
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> Option<String> {
        match value {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: Value) -> Option<Vec<u8>> {
        match value {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Option<Option<T>> {
        match value {
            Value::Null => Some(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// One result row: column names (shared by the rows of one result) and values. Reading a
/// column moves its value out, so each column is read once.
#[derive(Debug)]
pub(crate) struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    /// Column `column`, decoded; a missing column or a value of another type is
    /// [`StoreError::Corrupt`].
    pub(crate) fn get<T: FromValue>(&mut self, column: &str) -> Result<T, StoreError> {
        let i = self
            .names
            .iter()
            .position(|n| n == column)
            .ok_or_else(|| corrupt(format!("no column {column}")))?;
        self.at(i)
            .map_err(|_| corrupt(format!("column {column} has an unexpected type")))
    }

    /// Column number `i`, decoded.
    pub(crate) fn at<T: FromValue>(&mut self, i: usize) -> Result<T, StoreError> {
        let value = self
            .values
            .get_mut(i)
            .map(|v| std::mem::replace(v, Value::Null))
            .ok_or_else(|| corrupt(format!("no column {i}")))?;
        T::from_value(value).ok_or_else(|| corrupt(format!("column {i} has an unexpected type")))
    }
}

/// A connection or transaction of either backend, as the engine sees it.
#[async_trait]
pub(crate) trait Conn: Send {
    /// Runs `sql` and returns every row.
    async fn fetch_all(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Vec<Row>, StoreError>;

    /// Runs `sql` and hands each row to `each` as it arrives (large results).
    async fn for_each(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
        each: &mut (dyn FnMut(Row) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError>;

    /// Runs `sql`; returns how many rows it changed.
    async fn execute(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64, StoreError>;

    /// Commits a transaction (a plain connection has nothing to commit).
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// A statement and its arguments: `q("... $1 ...").bind(x).execute(conn)`.
#[derive(Debug)]
pub(crate) struct Q<'a> {
    sql: &'static str,
    args: Vec<Arg<'a>>,
}

/// Starts a statement.
pub(crate) fn q<'a>(sql: &'static str) -> Q<'a> {
    Q {
        sql,
        args: Vec::new(),
    }
}

impl<'a> Q<'a> {
    /// Adds the next argument (`$1`, `$2`, ... in order).
    pub(crate) fn bind(mut self, value: impl Into<Arg<'a>>) -> Q<'a> {
        self.args.push(value.into());
        self
    }

    /// Refuses text with a NUL character before it reaches either database: PostgreSQL
    /// cannot store one and SQLite can, so both refuse it alike.
    fn checked(&self) -> Result<(), StoreError> {
        for arg in &self.args {
            if let Arg::Text(Some(t)) = arg
                && t.contains('\0')
            {
                return Err(nul_error("text"));
            }
        }
        Ok(())
    }

    /// Runs it; returns how many rows it changed.
    pub(crate) async fn execute(self, conn: &mut dyn Conn) -> Result<u64, StoreError> {
        self.checked()?;
        conn.execute(self.sql, &self.args).await
    }

    /// Every row.
    pub(crate) async fn fetch_all(self, conn: &mut dyn Conn) -> Result<Vec<Row>, StoreError> {
        self.checked()?;
        conn.fetch_all(self.sql, &self.args).await
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional(
        self,
        conn: &mut dyn Conn,
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.fetch_all(conn).await?.into_iter().next())
    }

    /// The first row, which must exist.
    pub(crate) async fn fetch_one(self, conn: &mut dyn Conn) -> Result<Row, StoreError> {
        let sql = self.sql;
        self.fetch_optional(conn)
            .await?
            .ok_or_else(|| corrupt(format!("no row from {sql:?}")))
    }

    /// Each row, as it arrives.
    pub(crate) async fn for_each(
        self,
        conn: &mut dyn Conn,
        each: &mut (dyn FnMut(Row) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        self.checked()?;
        conn.for_each(self.sql, &self.args, each).await
    }

    /// The first column of the first row, which must exist.
    pub(crate) async fn scalar<T: FromValue>(self, conn: &mut dyn Conn) -> Result<T, StoreError> {
        self.fetch_one(conn).await?.at(0)
    }

    /// The first column of the first row, if there is a row.
    pub(crate) async fn scalar_opt<T: FromValue>(
        self,
        conn: &mut dyn Conn,
    ) -> Result<Option<T>, StoreError> {
        self.fetch_optional(conn)
            .await?
            .map(|mut row| row.at(0))
            .transpose()
    }

    /// The first column of every row.
    pub(crate) async fn scalars<T: FromValue>(
        self,
        conn: &mut dyn Conn,
    ) -> Result<Vec<T>, StoreError> {
        self.fetch_all(conn)
            .await?
            .into_iter()
            .map(|mut row| row.at(0))
            .collect()
    }
}

/// The error for text with a NUL character in `field`.
pub(crate) fn nul_error(field: &str) -> StoreError {
    invalid(
        field,
        "contains a NUL character (U+0000), which the store does not accept in text",
    )
}

/// Turns `sqlx` errors into [`StoreError`]s.
///
/// A uniqueness violation becomes [`StoreError::Conflict`], because only a concurrent writer can
/// cause one (existence is checked first inside the same write transaction). PostgreSQL's
/// refusal of a character in text (SQLSTATE 22021, 22P05) becomes [`StoreError::Invalid`]: bad
/// input, not a fault of the database (NUL is refused before, by [`Q`]).
pub(crate) fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.is_unique_violation() {
            return StoreError::Conflict {
                reason: d.message().to_owned(),
            };
        }
        if matches!(d.code().as_deref(), Some("22021" | "22P05")) {
            return invalid("text", d.message().to_owned());
        }
    }
    StoreError::Database(DatabaseError::sqlx(e))
}

/// A migration failure as a [`StoreError::Database`].
pub(crate) fn migrate_error(e: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Database(DatabaseError::migrate(e))
}

/// [`Conn`] for one sqlx database type: its transactions and pooled connections. One body for
/// both backends; the type names in the `match` cover both drivers' names for the schema's
/// column types.
macro_rules! sqlx_conn {
    ($db:ty, $module:ident) => {
        mod $module {
            use std::sync::Arc;

            use futures::TryStreamExt as _;
            use sqlx::{Column as _, Row as _, TypeInfo as _, ValueRef as _};

            use crate::engine::exec::{Arg, Conn, Row, Value, db};
            use crate::error::StoreError;
            use crate::validate::corrupt;

            type Query = sqlx::query::Query<'static, $db, <$db as sqlx::Database>::Arguments>;

            fn bind(mut query: Query, args: &[Arg<'_>]) -> Query {
                for arg in args {
                    query = match arg {
                        Arg::Int(v) => query.bind(*v),
                        Arg::Text(v) => query.bind(v.as_deref()),
                        Arg::Bytes(v) => query.bind(v.as_deref()),
                        Arg::Bool(v) => query.bind(*v),
                    };
                }
                query
            }

            fn names(row: &<$db as sqlx::Database>::Row) -> Arc<[String]> {
                row.columns().iter().map(|c| c.name().to_owned()).collect()
            }

            fn decode(
                row: &<$db as sqlx::Database>::Row,
                names: &Arc<[String]>,
            ) -> Result<Row, StoreError> {
                let mut values = Vec::with_capacity(names.len());
                for i in 0..names.len() {
                    let raw = row.try_get_raw(i).map_err(db)?;
                    if raw.is_null() {
                        values.push(Value::Null);
                        continue;
                    }
                    let ty = raw.type_info().name().to_owned();
                    let value = match ty.as_str() {
                        "INTEGER" | "INT8" | "BIGINT" => Value::Int(row.try_get(i).map_err(db)?),
                        "INT4" | "INT" => {
                            Value::Int(i64::from(row.try_get::<i32, _>(i).map_err(db)?))
                        }
                        "INT2" | "SMALLINT" => {
                            Value::Int(i64::from(row.try_get::<i16, _>(i).map_err(db)?))
                        }
                        "BOOL" | "BOOLEAN" => Value::Bool(row.try_get(i).map_err(db)?),
                        "TEXT" | "VARCHAR" | "NAME" | "BPCHAR" => {
                            Value::Text(row.try_get(i).map_err(db)?)
                        }
                        "BLOB" | "BYTEA" => Value::Bytes(row.try_get(i).map_err(db)?),
                        other => {
                            return Err(corrupt(format!(
                                "column {}: unexpected type {other}",
                                names[i]
                            )));
                        }
                    };
                    values.push(value);
                }
                Ok(Row {
                    names: names.clone(),
                    values,
                })
            }

            async fn fetch_all(
                conn: &mut <$db as sqlx::Database>::Connection,
                sql: &'static str,
                args: &[Arg<'_>],
            ) -> Result<Vec<Row>, StoreError> {
                let rows = bind(sqlx::query(sql), args)
                    .fetch_all(conn)
                    .await
                    .map_err(db)?;
                let Some(first) = rows.first() else {
                    return Ok(Vec::new());
                };
                let names = names(first);
                rows.iter().map(|row| decode(row, &names)).collect()
            }

            async fn for_each(
                conn: &mut <$db as sqlx::Database>::Connection,
                sql: &'static str,
                args: &[Arg<'_>],
                each: &mut (dyn FnMut(Row) -> Result<(), StoreError> + Send),
            ) -> Result<(), StoreError> {
                let mut rows = bind(sqlx::query(sql), args).fetch(conn);
                let mut shared: Option<Arc<[String]>> = None;
                while let Some(row) = rows.try_next().await.map_err(db)? {
                    let names = shared.get_or_insert_with(|| names(&row));
                    each(decode(&row, names)?)?;
                }
                Ok(())
            }

            async fn execute(
                conn: &mut <$db as sqlx::Database>::Connection,
                sql: &'static str,
                args: &[Arg<'_>],
            ) -> Result<u64, StoreError> {
                let done = bind(sqlx::query(sql), args)
                    .execute(conn)
                    .await
                    .map_err(db)?;
                Ok(done.rows_affected())
            }

            #[async_trait::async_trait]
            impl Conn for sqlx::Transaction<'static, $db> {
                async fn fetch_all(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                ) -> Result<Vec<Row>, StoreError> {
                    fetch_all(&mut **self, sql, args).await
                }

                async fn for_each(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                    each: &mut (dyn FnMut(Row) -> Result<(), StoreError> + Send),
                ) -> Result<(), StoreError> {
                    for_each(&mut **self, sql, args, each).await
                }

                async fn execute(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                ) -> Result<u64, StoreError> {
                    execute(&mut **self, sql, args).await
                }

                async fn commit(self: Box<Self>) -> Result<(), StoreError> {
                    (*self).commit().await.map_err(db)
                }
            }

            #[async_trait::async_trait]
            impl Conn for sqlx::pool::PoolConnection<$db> {
                async fn fetch_all(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                ) -> Result<Vec<Row>, StoreError> {
                    fetch_all(&mut **self, sql, args).await
                }

                async fn for_each(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                    each: &mut (dyn FnMut(Row) -> Result<(), StoreError> + Send),
                ) -> Result<(), StoreError> {
                    for_each(&mut **self, sql, args, each).await
                }

                async fn execute(
                    &mut self,
                    sql: &'static str,
                    args: &[Arg<'_>],
                ) -> Result<u64, StoreError> {
                    execute(&mut **self, sql, args).await
                }

                async fn commit(self: Box<Self>) -> Result<(), StoreError> {
                    Ok(())
                }
            }
        }
    };
}

sqlx_conn!(sqlx::Sqlite, sqlite_conn);
sqlx_conn!(sqlx::Postgres, postgres_conn);
