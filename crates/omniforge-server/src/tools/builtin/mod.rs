//! The built-ins that are not authoring: [`instructions`] (`omniforge_instructions`, and the
//! server-level instructions text) and [`forward`] (`omniforge_call_tool`); [`from_scripts`]:
//! which built-ins a stored tool's `call_builtin` may run.

pub(crate) mod forward;
pub(crate) mod from_scripts;
pub(crate) mod instructions;
