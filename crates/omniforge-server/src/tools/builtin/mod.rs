//! The built-ins that are not authoring: [`instructions`] (`omniforge_instructions`, and the
//! server-level instructions text), [`search`] (`omniforge_search_tools`,
//! `omniforge_get_tool_schemas`; [`signature`]: a tool as a Python-style signature) and
//! [`forward`] (`omniforge_call_tool`); [`from_scripts`]: which built-ins a stored tool's
//! `call_builtin` may run.

pub(crate) mod forward;
pub(crate) mod from_scripts;
pub(crate) mod instructions;
pub(crate) mod search;
pub(crate) mod signature;
