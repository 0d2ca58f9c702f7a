//! Pipeline files: raw (spanned) decoding, loading, validation, and the
//! validated model.

pub(crate) mod clis;
pub(crate) mod diagnostic;
pub(crate) mod front_matter;
pub mod graph;
pub(crate) mod load;
pub(crate) mod mcp_json;
pub(crate) mod model;
pub mod raw;
pub(crate) mod schema;
pub(crate) mod template;
pub(crate) mod validate;

pub(crate) use diagnostic::Diagnostic;
pub(crate) use load::Invalid;
#[cfg(test)]
pub(crate) use load::Loaded;
pub use load::{load, load_str};
pub use model::Pipeline;
pub(crate) use model::{Agent, Phase};
