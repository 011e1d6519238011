#!/usr/bin/env bash
# The sanitizer build (docs/HARDENING.md): core, sim, visualizer and text built with
# clang under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/), their test
# suites run, then every libFuzzer target of fuzz/ runs briefly on its seed corpus.
#   bash scripts/sanitize.sh               # build, tests, 10 s of each fuzzer
#   QN_FUZZ_SECONDS=600 bash scripts/sanitize.sh
#   bash scripts/sanitize.sh --runs 1000000   # the documented long run: N executions each
# The executor (LibTorch) is not in this build: Debian's LibTorch is not instrumented,
# and its suites take CI's time already (docs/HARDENING.md says what that leaves out).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-asan"
runs=""
if [ "${1:-}" = "--runs" ]; then
  [ -n "${2:-}" ] || { echo "sanitize: --runs needs a number" >&2; exit 2; }
  runs="$2"
elif [ -n "${1:-}" ]; then
  echo "sanitize: unknown option '$1' (known: --runs N)" >&2
  exit 2
fi
command -v clang++-14 > /dev/null || { echo "sanitize: clang++-14 missing (bash scripts/setup.sh installs it)" >&2; exit 3; }

CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DQN_WITH_TORCH=OFF -DQN_WITH_PYTHON=OFF -DQN_FUZZ=ON -DQN_BUILD_BENCHMARKS=OFF > "$build.configure.log" ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)"

# Qt's own allocations at exit are not ours to fix: leak checking stays on for the
# rest through the suppressions file.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export QT_QPA_PLATFORM=offscreen
# Left to build/ (uninstrumented), for CI's 45 minutes: the suites that run the same code
# over and over, 1-2.5 minutes each under the sanitizers (session 38, a 2-vCPU EPYC):
#  - the planner's full search of Megatron's 175B layouts (146 s): its code runs here in
#    Planner.ListsFeasibleLayoutsWithReasonsForTheOthers;
#  - three simulator suites that simulate the whole step again and again (replicas, jitter
#    samples, the reduced model beside the full one; 126, 112 and 92 s): the simulator's
#    code runs here in the other Simulator suites;
#  - GPT-2's tokenizer over the whole Brown corpus (65 s): its code runs here on the edge
#    cases, and the bpe_encode and bpe_files fuzzers below feed it arbitrary input.
heavy=(Planner.SearchesMemoryOptionsAndBeatsMegatronsPublishedLayout
       Simulator.WhatIfsSimulateTheirReplicasAndStandInsAsTheFullStepDoes
       Simulator.JitterExtrapolatesTheLatestReplicaFromSamples
       Simulator.ReducedDataParallelModelEqualsTheFullSimulation
       Tokenizer.MatchesTheJavaScriptEncoderOnTheWholeBrownCorpus)
(cd "$build" && ctest --output-on-failure --timeout 900 -j "$(nproc)" \
  -E "^($(IFS='|'; echo "${heavy[*]}" | sed 's/\./\\./g'))\$")

seconds="${QN_FUZZ_SECONDS:-10}"
# One fuzzer on a copy of its seed corpus; what it did is printed in one piece when it ends,
# since the fuzzers run side by side, one per core (each is one process on one core).
run_fuzzer() {
  local fuzzer="$1" name corpus log status=0 limit
  name="$(basename "$fuzzer" _fuzzer)"
  corpus="$(mktemp -d)"
  cp "$root/fuzz/corpus/$name"/* "$corpus"/ 2> /dev/null || true
  if [ -n "$runs" ]; then limit=(-runs="$runs"); else limit=(-max_total_time="$seconds"); fi
  log="$corpus.log"
  (cd "$build" && "$fuzzer" "${limit[@]}" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 "$corpus" \
     > "$log" 2>&1) || status=$?
  local report
  report="sanitize: $name fuzzer (${runs:-$seconds s}${runs:+ executions})
$(grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|Done)" "$log" || true)"
  if [ "$status" != 0 ]; then
    report+="
$(tail -40 "$log")
sanitize: the $name fuzzer found a problem (the input is saved in $build as crash-*)"
  fi
  printf '%s\n' "$report"
  rm -rf "$corpus" "$log"
  return "$status"
}
pids=()
for fuzzer in "$build"/bin/*_fuzzer; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  run_fuzzer "$fuzzer" &
  pids+=($!)
done
# Each fuzzer's own status (bash keeps it after wait -n took the process).
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || exit 1
echo "sanitize: all suites and fuzzers clean"
