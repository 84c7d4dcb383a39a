#!/usr/bin/env bash
# A short fuzz run on the stable toolchain: the kept corpus of each fuzz target (fuzz/corpus/)
# mutated at random through the target's own checks (fuzz/checks/), a fixed number of inputs per
# target (under a minute each on two cores), from a fixed seed: the run is the same on any
# machine, so it gates a change without chance in it. PV_FUZZ_SEED=N explores other inputs (a
# few seeds per change are worth a minute each). A failing input is written to
# target/tmp/fuzz-failures/TARGET-SEED and the run fails naming it.
# The coverage-guided runs (cargo-fuzz, nightly) are in fuzz/README.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export PV_FUZZ_SEED="${PV_FUZZ_SEED:-1}"
echo "fuzz seed: $PV_FUZZ_SEED"
fuzz() { # PACKAGE TEST RUNS
  PV_FUZZ_RUNS="$3" cargo test --quiet --release --locked -p "$1" --test fuzz_replay -- --nocapture --exact "$2" 2>&1 ||
    { echo "FAIL: fuzz $2 found an input its checks refuse (PV_FUZZ_SEED=$PV_FUZZ_SEED PV_FUZZ_RUNS=$3)" >&2; exit 1; }
}
fuzz pv-apiserver mutated_write_corpus_passes 400000
fuzz pv-apiserver mutated_read_corpus_passes 4000000
fuzz pv-model mutated_model_corpus_passes 20000000
echo "e2e-fuzz: ok"
