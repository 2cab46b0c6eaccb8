//! Manifest tools: [`source`] loads and hot-reloads the forge manifests the operator
//! configured and publishes their RPCs as catalog entries; [`call`] dispatches one call to
//! the Connect upstream and maps its outcome; [`health`] keeps each upstream's last outcome.

pub(crate) mod call;
pub(crate) mod health;
pub(crate) mod source;
