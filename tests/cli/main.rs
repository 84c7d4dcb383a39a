//! The `pv-controller` binary as its users run it, one test binary for every command (a single
//! link of the test harness): `cargo test --release --test cli MODULE` runs one module's cases.

mod util;

mod bench;
mod dist_profile;
mod explain;
mod flags;
mod layers;
mod packaging;
mod run_cluster;
mod run_recycler;
mod simulate;
mod up;
