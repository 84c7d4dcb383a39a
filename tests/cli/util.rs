//! What the CLI tests share: the built binary, its output as text, the shape of a user error.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A running `up`, killed (by its own PID) when dropped; stderr goes to `log`.
pub struct Up {
    child: Child,
    /// The kubeconfig `up` wrote.
    pub kubeconfig: String,
    log: std::path::PathBuf,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    /// Starts `up` with its data directory under `dir` and `extra` flags; returns once it
    /// serves.
    pub fn start(dir: &Path, extra: &[&str]) -> Up {
        let log = dir.join("up.log");
        let mut child = Command::new(BIN)
            .arg("up")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("up starts");
        let stdout = child.stdout.take().unwrap();
        let mut kubeconfig = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(p) = line.strip_prefix("kubeconfig: ") {
                kubeconfig = Some(p.to_string());
            }
            if line.starts_with("server: ") {
                break;
            }
        }
        let kubeconfig = kubeconfig
            .unwrap_or_else(|| panic!("no kubeconfig line; log:\n{}", std::fs::read_to_string(&log).unwrap()));
        Up { child, kubeconfig, log }
    }

    /// The process's ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What `up` logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log has a line matching `f`.
    pub fn wait_log(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if let Some(l) = log.lines().find(|l| f(l)) {
                return l.to_string();
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no {what} in the log:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// True when kubectl runs here. Under CI (`CI` set) its absence fails the test: `.ci/run`
/// installs kubectl, so a kubectl check skipped there would pass without having run.
pub fn kubectl_available() -> bool {
    let ok = Command::new("kubectl").args(["version", "--client"]).output().is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "kubectl is missing under CI: its checks would pass without running"
    );
    ok
}
