#!/usr/bin/env bash
# A short fuzz run on the stable toolchain: the kept corpus of each fuzz target (fuzz/corpus/)
# mutated at random through the target's own checks (fuzz/checks/), PV_FUZZ_SECONDS per target
# (default 45; `write` and `read` side by side, then `model`). A failing input is written to
# target/tmp/fuzz-failures/TARGET-SEED and the run fails naming it; PV_FUZZ_SEED=SEED replays a
# run. The coverage-guided runs (cargo-fuzz, nightly) are in fuzz/README.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export PV_FUZZ_SECONDS="${PV_FUZZ_SECONDS:-45}"
cargo test --quiet --release --locked -p pv-apiserver -p pv-model --test fuzz_replay -- --nocapture mutated 2>&1 ||
  { echo "FAIL: a fuzz target found an input its checks refuse" >&2; exit 1; }
echo "e2e-fuzz: ok"
