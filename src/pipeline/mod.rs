//! Pipeline files: raw (spanned) decoding, loading, validation, and the
//! validated model.

pub mod clis;
pub mod diagnostic;
pub mod front_matter;
pub mod graph;
pub mod load;
pub mod mcp_json;
pub mod model;
pub mod raw;
pub mod schema;
pub mod template;
pub mod validate;

pub use diagnostic::{Diagnostic, Severity, SourceFile};
pub use load::{Invalid, Loaded, load, load_str};
pub use model::{Agent, Enforcement, Phase, Pipeline};
