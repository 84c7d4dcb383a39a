//! placeholder
pub mod durable;
