//! The processes under test: started, killed with SIGKILL, paused with SIGSTOP, restarted as a
//! Deployment (or an operator) would, and sampled for resident memory and open descriptors.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One process the soak starts and restarts.
pub struct Proc {
    /// Short name (`up`, `replica-a`, `kube-apiserver`).
    pub name: String,
    argv: Vec<String>,
    log: PathBuf,
    /// Where its pid is recorded for others (real-cluster.sh's pid files), if anywhere.
    pidfile: Option<PathBuf>,
    child: Option<Child>,
    /// Pid of a process this soak did not start (adopted from a pid file) until its first kill.
    adopted: Option<u32>,
    /// Instance number, +1 per start.
    pub instance: u64,
    /// When the current instance started.
    pub started: Instant,
    /// Paused with SIGSTOP until then.
    pub paused_until: Option<Instant>,
    /// Killed on purpose; restart at then.
    pub restart_at: Option<Instant>,
}

impl Proc {
    /// A process started from `argv`, logging to `log`.
    pub fn new(name: &str, argv: Vec<String>, log: PathBuf) -> Proc {
        Proc {
            name: name.into(),
            argv,
            log,
            pidfile: None,
            child: None,
            adopted: None,
            instance: 0,
            started: Instant::now(),
            paused_until: None,
            restart_at: None,
        }
    }

    /// A process another script started: its command line is read from /proc, so a restart
    /// runs it again exactly; `pidfile` is rewritten with the new pid.
    pub fn adopt(name: &str, pidfile: &Path, log: PathBuf) -> anyhow::Result<Proc> {
        let pid: u32 = std::fs::read_to_string(pidfile)?.trim().parse()?;
        let raw = std::fs::read(format!("/proc/{pid}/cmdline"))?;
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let mut p = Proc::new(name, argv, log);
        p.pidfile = Some(pidfile.to_path_buf());
        p.adopted = Some(pid);
        p.instance = 1;
        Ok(p)
    }

    /// Starts a new instance.
    pub fn start(&mut self) -> anyhow::Result<()> {
        let log = OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        if let Some(f) = &self.pidfile {
            std::fs::write(f, format!("{}\n", child.id()))?;
        }
        self.child = Some(child);
        self.adopted = None;
        self.instance += 1;
        self.started = Instant::now();
        self.paused_until = None;
        self.restart_at = None;
        Ok(())
    }

    /// The running pid, if any.
    pub fn pid(&self) -> Option<u32> {
        self.adopted.or(self.child.as_ref().map(|c| c.id()))
    }

    /// Sends a signal by name (`KILL`, `STOP`, `CONT`).
    pub fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
        }
    }

    /// SIGKILL, reaped; restarted by [`Proc::supervise`] after `down_for`.
    pub fn kill9(&mut self, down_for: Duration) {
        self.signal("KILL");
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        } else if let Some(pid) = self.adopted.take() {
            // Not our child: wait for it to vanish.
            let t0 = Instant::now();
            while Path::new(&format!("/proc/{pid}")).exists() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.paused_until = None;
        self.restart_at = Some(Instant::now() + down_for);
    }

    /// SIGSTOP until `now + for_`.
    pub fn pause(&mut self, for_: Duration) {
        self.signal("STOP");
        self.paused_until = Some(Instant::now() + for_);
    }

    /// Continues a paused process at its time (or at once with `now`), restarts one killed on
    /// purpose at its time, and one that exited by itself. Returns `Some(exit status)` when the
    /// process had exited by itself (it is restarted after a second, as a Deployment would).
    pub fn supervise(&mut self, now: bool) -> anyhow::Result<Option<String>> {
        if let Some(t) = self.paused_until {
            if now || Instant::now() >= t {
                self.signal("CONT");
                self.paused_until = None;
            }
        }
        if let Some(t) = self.restart_at {
            if now || Instant::now() >= t {
                self.start()?;
            }
            return Ok(None);
        }
        let mut exited = None;
        if let Some(c) = self.child.as_mut() {
            if let Some(status) = c.try_wait()? {
                exited = Some(status.to_string());
            }
        }
        if exited.is_some() {
            self.child = None;
            self.restart_at = Some(Instant::now() + Duration::from_secs(1));
        }
        Ok(exited)
    }

    /// True when a live instance is running and not paused.
    pub fn serving(&self) -> bool {
        self.pid().is_some() && self.restart_at.is_none() && self.paused_until.is_none()
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Kills the process for good (end of the run).
    pub fn stop(&mut self) {
        self.signal("CONT");
        self.signal("KILL");
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        self.adopted = None;
        self.restart_at = None;
    }
}

/// Resident memory (KiB) and open descriptors of `pid`.
pub fn sample(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((rss, fds))
}

/// Samples of one process instance: (seconds since the run started, RSS KiB, fds).
#[derive(Default, Clone)]
pub struct Series {
    /// Samples.
    pub points: Vec<(f64, f64, f64)>,
}

/// Least-squares slope of `y` over `x`.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let num: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let den: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// What the samples of one instance say after its warm-up.
pub struct Trend {
    /// Seconds measured (after warm-up).
    pub window_s: f64,
    /// Mean RSS, MiB.
    pub rss_mean_mib: f64,
    /// RSS slope, MiB per hour.
    pub rss_mib_per_h: f64,
    /// RSS growth the fit predicts over the window, MiB.
    pub rss_growth_mib: f64,
    /// Descriptor slope, per hour.
    pub fds_per_h: f64,
    /// First and last descriptor count.
    pub fds: (f64, f64),
}

impl Series {
    /// The trend after `warmup` seconds of the instance's life (at least a quarter of it).
    pub fn trend(&self, warmup: f64) -> Option<Trend> {
        let (t0, t1) = (self.points.first()?.0, self.points.last()?.0);
        let skip = warmup.max((t1 - t0) / 4.0);
        let pts: Vec<&(f64, f64, f64)> = self.points.iter().filter(|p| p.0 >= t0 + skip).collect();
        if pts.len() < 3 {
            return None;
        }
        let window_s = pts.last()?.0 - pts.first()?.0;
        let rss: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1 / 1024.0)).collect();
        let fds: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.2)).collect();
        let rss_slope = slope(&rss);
        Some(Trend {
            window_s,
            rss_mean_mib: rss.iter().map(|p| p.1).sum::<f64>() / rss.len() as f64,
            rss_mib_per_h: rss_slope * 3600.0,
            rss_growth_mib: rss_slope * window_s,
            fds_per_h: slope(&fds) * 3600.0,
            fds: (fds.first()?.1, fds.last()?.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_gradient_and_flat_series_have_none() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), 2.0);
        assert_eq!(slope(&[(0.0, 4.0), (1.0, 4.0), (5.0, 4.0)]), 0.0);
    }

    #[test]
    fn the_trend_skips_the_warm_up() {
        let mut s = Series::default();
        // Grows for the first 100 s, then flat at 200 MiB.
        for t in 0..400 {
            let rss = if t < 100 { 1024.0 * (100.0 + t as f64) } else { 1024.0 * 200.0 };
            s.points.push((t as f64, rss, 10.0));
        }
        let tr = s.trend(100.0).unwrap();
        assert!(tr.rss_mib_per_h.abs() < 1e-6, "{}", tr.rss_mib_per_h);
        assert_eq!(tr.rss_mean_mib, 200.0);
        assert_eq!(tr.fds, (10.0, 10.0));
    }
}
