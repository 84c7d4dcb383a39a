//! A short fuzz run on the stable toolchain: inputs of the kept corpus, mutated at random the way
//! libFuzzer mutates (bit flips, interesting bytes, erased, inserted, copied and spliced ranges,
//! syntax tokens of the formats the targets read), fed through a target's checks for a time
//! budget. Without coverage guidance it explores less than `cargo fuzz`, but it needs no
//! nightly and no sanitizer build, so `.ci/run` runs it on every change
//! (`scripts/e2e-fuzz.sh`); the coverage-guided runs stay in `fuzz/README.md`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Tokens of JSON, YAML, protobuf framing and the Kubernetes vocabulary the targets read.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"null",
    b"true",
    b"false",
    b"-1",
    b"0",
    b"1e400",
    b"18446744073709551616",
    b"\\u0000",
    b"\"\"",
    b"{}",
    b"[]",
    b"\n",
    b"- ",
    b": ",
    b"&a",
    b"*a",
    b"!!binary",
    b"k8s\0",
    b"metadata",
    b"name",
    b"namespace",
    b"spec",
    b"status",
    b"phase",
    b"claimRef",
    b"volumeName",
    b"storageClassName",
    b"capacity",
    b"storage",
    b"1Gi",
    b"1e3",
    b"0.1m",
    b"accessModes",
    b"ReadWriteOnce",
    b"finalizers",
    b"deletionTimestamp",
    b"resourceVersion",
    b"uid",
    b"labels",
    b"annotations",
    b"$patch",
    b"delete",
    b"replace",
    b"$setElementOrder/",
    b"$retainKeys",
    b"op",
    b"add",
    b"remove",
    b"path",
    b"/metadata/labels",
    b"value",
    b"in",
    b"notin",
    b"!=",
    b"==",
    b"?labelSelector=",
    b"&fieldSelector=",
    b"&limit=",
    b"&continue=",
    b"&resourceVersion=",
    b"&watch=1",
    b"application/json",
    b"as=Table",
    b"application/vnd.kubernetes.protobuf",
    b"application/yaml",
];

/// A small, seeded generator (xorshift64*): the run is reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One to four mutations of `input`; `other` is another corpus input to splice from. The first
/// byte or two select a verb or kind in the API targets, so they are mutated like the rest.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0u8, 1, 0x7f, 0x80, 0xff, b'"', b'\\', b'{'][rng.below(8)];
            }
            2 if !v.is_empty() => {
                let n = 1 + rng.below(16.min(v.len()));
                let from = rng.below(v.len() - n + 1);
                v.drain(from..from + n);
            }
            3 if !v.is_empty() => {
                let n = 1 + rng.below(32.min(v.len()));
                let from = rng.below(v.len() - n + 1);
                let chunk = v[from..from + n].to_vec();
                v.splice(at..at, chunk);
            }
            4 if !other.is_empty() => {
                let n = 1 + rng.below(64.min(other.len()));
                let from = rng.below(other.len() - n + 1);
                v.splice(at..at, other[from..from + n].iter().copied());
            }
            5 if !other.is_empty() => {
                // Crossover: this input's head, the other's tail.
                let cut = rng.below(other.len());
                v.truncate(at);
                v.extend_from_slice(&other[cut..]);
            }
            6 if !v.is_empty() => {
                // A number's digits made large or negative.
                let i = rng.below(v.len());
                if v[i].is_ascii_digit() {
                    v.splice(i..i, b"-99999999999".iter().copied().take(1 + rng.below(12)));
                }
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
        }
    }
    v.truncate(max_len);
    v
}

/// The files under `dir`, sorted; empty when it does not exist.
pub fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// How much a mutation run does: `PV_FUZZ_RUNS` inputs when set (the same inputs on any
/// machine, for a given seed), else for `PV_FUZZ_SECONDS`, else the caller's default (a number of
/// inputs, so that a test run is the same run on any machine).
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// This many inputs.
    Runs(u64),
    /// For this long.
    Time(Duration),
}

/// The budget of a run (see [`Budget`]).
pub fn budget(default: Budget) -> Budget {
    let env = |name: &str| std::env::var(name).ok();
    if let Some(n) = env("PV_FUZZ_RUNS").and_then(|s| s.parse().ok()) {
        return Budget::Runs(n);
    }
    env("PV_FUZZ_SECONDS")
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(default, |s| Budget::Time(Duration::from_secs_f64(s)))
}

/// The seed of a run: `PV_FUZZ_SEED`, else 1, so that a run is the same every time unless asked
/// otherwise (`scripts/e2e-fuzz.sh` seeds from the commit, so each change explores new inputs).
pub fn seed() -> u64 {
    std::env::var("PV_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

/// Mutates inputs of `corpus` through `check` for `budget`. Panics on the first input `check`
/// fails, after writing it to `failed_dir/TARGET-SEED` and naming the file, the seed and the
/// number of the execution, so the failure can be replayed and kept in `fuzz/regressions/`.
pub fn run(target: &str, corpus: &Path, check: fn(&[u8]), budget: Budget, failed_dir: &Path) -> u64 {
    let files = inputs(corpus);
    assert!(!files.is_empty(), "no corpus under {}", corpus.display());
    let data: Vec<Vec<u8>> =
        files.iter().map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))).collect();
    let max_len = data.iter().map(Vec::len).max().unwrap_or(0).max(4096);
    let seed = seed();
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut execs = 0;
    let more = |execs: u64| match budget {
        Budget::Runs(n) => execs < n,
        Budget::Time(t) => start.elapsed() < t,
    };
    while more(execs) {
        let base = &data[rng.below(data.len())];
        let other = &data[rng.below(data.len())];
        let input = mutate(&mut rng, base, other, max_len);
        execs += 1;
        if std::panic::catch_unwind(|| check(&input)).is_err() {
            std::fs::create_dir_all(failed_dir).ok();
            let path = failed_dir.join(format!("{target}-{seed}"));
            std::fs::write(&path, &input).ok();
            panic!(
                "{target}: execution {execs} of the run with PV_FUZZ_SEED={seed} fails; the input is in {}",
                path.display()
            );
        }
    }
    eprintln!(
        "fuzz {target}: {execs} mutated inputs in {:.0} s, seed {seed}, all passed",
        start.elapsed().as_secs_f64()
    );
    execs
}
