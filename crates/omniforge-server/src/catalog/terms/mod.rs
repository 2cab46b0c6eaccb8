//! A tool as search terms: [`fields`] reads its searchable fields from its served
//! definition, [`text`] turns text into terms. Knows no catalog type.

pub(crate) mod fields;
pub(crate) mod text;
