//! What the CLI tests share: the built binary, its output as text, the shape of a user error.

use std::process::{Command, Output};

/// The `pv-controller` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_pv-controller");

/// Runs the binary with `args`, with no `KUBECONFIG` or `RUST_LOG` from the environment.
pub fn pv_controller(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env_remove("KUBECONFIG").env_remove("RUST_LOG").output().expect("binary runs")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit 1 with one `error:` line (no panic) containing every one of `needles`.
pub fn assert_user_error(o: &Output, needles: &[&str]) {
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {e}");
    assert!(e.starts_with("error: "), "stderr: {e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    for n in needles {
        assert!(e.contains(n), "{n:?} not in {e:?}");
    }
    assert!(!e.contains("panicked"), "{e}");
}
