#!/usr/bin/env bash
# Two nodes on one machine: two network namespaces joined by a veth pair (10.213.N.1 and
# 10.213.N.2, made here and removed on exit; traffic only between them), `quintnet launch
# --nnodes 2 --node-rank i --master-addr 10.213.N.1` in each, 2 x 4 ranks of a 2x2x2 ViT,
# against the same plan as one node of 8 ranks.  ctest runs it (tests/multinode/
# CMakeLists.txt); where the machine allows no network namespaces (not root, no
# iproute2, a container without them) it exits 77, which ctest reports as skipped.
#
#   two_nodes.sh BIN_DIR WORK_DIR CASE
#     equal       the two-node run's per-step losses equal the one-node run's, bit for bit
#     kill-node   node 1's ranks killed mid-run: node 0's launcher exits non-zero within the
#                 communication timeout, its ranks naming node 1's four as silent; no
#                 process is left
#     wrong-token a rank in node 1's namespace with another run's token is refused with the
#                 one-line message, and the run (retried with the right token) trains
#     cut-short   the link between the nodes down for 5 s mid-run (timeout 20 s): the run
#                 continues, its losses still bitwise the one-node run's
#     cut-long    the link down until every rank has given up: both launchers exit non-zero
#                 within the timeout (plus the time to notice), nothing is left running; with
#                 the link back, both nodes resume from the last checkpoint and finish with the
#                 one-node run's losses, bit for bit
#     port-taken  another process listens on the master's port: node 0 says so in one line and
#                 exits non-zero; node 1 gives up within the timeout
#     slow-link   the link between the nodes rate-limited to 10 Mbit/s both ways (tc tbf): the
#                 run continues with the one-node run's losses, bit for bit, and its trace shows
#                 the pipeline messages between the nodes slower than without the limit
#     mpirun      OpenMPI's mpirun in node 0's namespace starts 4 ranks in each (its rsh agent
#                 enters the namespace that holds the address), MASTER_ADDR/PORT and
#                 QN_RUN_TOKEN in the job's environment as docs/HARDENING.md says: the
#                 one-node run's losses
#     slurm       4 ranks per namespace started directly with the variables SLURM sets
#                 (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE) and the
#                 MASTER_ADDR/PORT and QN_RUN_TOKEN an sbatch script exports: the one-node
#                 run's losses
set -euo pipefail
bin="$1" work="$2" case="$3"
mkdir -p "$work"
# A previous run's files would end the waits for "steps logged" at once (and cut the link
# before node 1 has joined): start from none.
rm -rf "$work"/*.jsonl "$work"/*.json "$work"/*.out "$work/ckpt"

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "no ip (iproute2)"

# Names of this process's own (interface names: 15 characters at most).
id=$(( $$ % 100000 )) net=$(( $$ % 200 + 20 ))
ns0="qn$id-node0" ns1="qn$id-node1" veth0="qn${id}a" veth1="qn${id}b"
addr0="10.213.$net.1" addr1="10.213.$net.2"
cleanup() {
  for ns in "$ns0" "$ns1"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
}
trap cleanup EXIT
ip netns add "$ns0" 2> /dev/null || skip "cannot create a network namespace (ip netns add failed)"
ip netns add "$ns1"
ip link add "$veth0" type veth peer name "$veth1" 2> /dev/null || skip "cannot create a veth pair"
ip link set "$veth0" netns "$ns0"
ip link set "$veth1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/24" dev "$veth0"
ip -n "$ns1" addr add "$addr1/24" dev "$veth1"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$veth0" up
ip -n "$ns1" link set "$veth1" up

cat > "$work/plan.yaml" <<PLAN
batch_size: 16
grad_acc_steps: 2
depth: 4
hidden_dim: 32
n_heads: 4
mesh_dim: [2, 2, 2]
PLAN
train_args=(--config "$work/plan.yaml" --no-eval --quiet --threads 1 --timeout 20)
port=$(( 29600 + $$ % 300 ))
# node NODE NS TOKEN STEPS METRICS [MORE...]: one node's launcher in its namespace; MORE
# goes to quintnet-train.
node() {
  ip netns exec "$2" "$bin/quintnet-launch" --nnodes 2 --node-rank "$1" --master-addr "$addr0" --master-port "$port" \
    --token "$3" --nproc 4 -- "$bin/quintnet-train" "${train_args[@]}" --max-steps "$4" --metrics "$5" "${@:6}"
}
losses() { sed -E 's/.*"step":([0-9]+).*"loss":([^,]+),.*/\1 \2/' "$1"; }
one_node() {  # STEPS METRICS: the reference, all 8 ranks in this machine's own namespace
  "$bin/quintnet-launch" --nproc 8 -- "$bin/quintnet-train" "${train_args[@]}" --max-steps "$1" --metrics "$2" \
    > "$work/one_node.out"
}
logged() { [ -s "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }  # METRICS N: at least N steps logged
link() { ip -n "$ns0" link set "$veth0" "$1"; }  # up or down: the cable between the nodes

case "$case" in
  equal)
    "$bin/quintnet-launch" --nproc 8 -- "$bin/quintnet-train" "${train_args[@]}" --max-steps 20 \
      --metrics "$work/one_node.jsonl" > "$work/one_node.out"
    node 1 "$ns1" secret 20 "$work/unused.jsonl" > "$work/node1.out" 2>&1 &
    node 0 "$ns0" secret 20 "$work/two_nodes.jsonl" > "$work/node0.out" 2>&1 || { cat "$work/node0.out"; exit 1; }
    wait $! || { cat "$work/node1.out"; exit 1; }
    if ! diff <(losses "$work/one_node.jsonl") <(losses "$work/two_nodes.jsonl"); then
      echo "FAIL: the two-node losses differ from the one-node run's"; exit 1
    fi
    echo "PASS: 2 nodes x 4 ranks over $addr0/$addr1: $(losses "$work/two_nodes.jsonl" | wc -l) steps, losses bitwise equal to 1 node x 8"
    ;;
  kill-node)
    node 1 "$ns1" secret 100000 "$work/unused.jsonl" > "$work/node1.out" 2>&1 &
    node1=$!
    start=$(date +%s)
    node 0 "$ns0" secret 100000 "$work/two_nodes.jsonl" > "$work/node0.out" 2>&1 &
    node0=$!
    # Mid-run: once a few steps are logged, every rank of node 1 dies at once.
    for _ in $(seq 120); do [ -s "$work/two_nodes.jsonl" ] && [ "$(wc -l < "$work/two_nodes.jsonl")" -ge 3 ] && break; sleep 0.5; done
    killed=$(date +%s)
    for pid in $(ip netns pids "$ns1"); do kill -9 "$pid" 2> /dev/null || true; done
    wait $node1 2> /dev/null || true
    rc=0; wait $node0 || rc=$?
    took=$(( $(date +%s) - killed ))
    if [ $rc = 0 ]; then echo "FAIL: node 0 exited 0 after node 1 died"; cat "$work/node0.out"; exit 1; fi
    if [ $took -gt 60 ]; then echo "FAIL: node 0 took $took s to exit (timeout 20 s)"; exit 1; fi
    if [ -n "$(ip netns pids "$ns0")" ]; then echo "FAIL: processes left in node 0"; exit 1; fi
    grep -q "quintnet launch: failed" "$work/node0.out" || { echo "FAIL: node 0 did not name the failure"; cat "$work/node0.out"; exit 1; }
    # Node 0's ranks name node 1's four as the ones gone silent.
    grep -q "no heartbeat.*from rank 4.*rank 5.*rank 6.*rank 7" "$work/node0.out" ||
      { echo "FAIL: node 0 did not name node 1's ranks"; cat "$work/node0.out"; exit 1; }
    echo "PASS: node 1 killed after $(( killed - start )) s; node 0 exited $rc within $took s: $(grep -m1 "quintnet launch: failed" "$work/node0.out")"
    ;;
  wrong-token)
    node 1 "$ns1" not-the-secret 5 "$work/unused.jsonl" > "$work/node1.out" 2>&1 &
    node1=$!
    node 0 "$ns0" secret 5 "$work/refused.jsonl" > "$work/node0.out" 2>&1 &
    node0=$!
    rc1=0; wait $node1 || rc1=$?
    kill $node0 2> /dev/null || true; wait $node0 2> /dev/null || true
    if [ $rc1 = 0 ]; then echo "FAIL: the rank with another token was not refused"; cat "$work/node1.out"; exit 1; fi
    grep -qi "token" "$work/node1.out" || { echo "FAIL: the refusal does not say why"; cat "$work/node1.out"; exit 1; }
    port=$(( port + 1 ))
    node 1 "$ns1" secret 5 "$work/unused.jsonl" > "$work/node1b.out" 2>&1 &
    node 0 "$ns0" secret 5 "$work/retried.jsonl" > "$work/node0b.out" 2>&1 || { cat "$work/node0b.out"; exit 1; }
    wait $! || { cat "$work/node1b.out"; exit 1; }
    echo "PASS: another token refused ($(grep -m1 -i token "$work/node1.out")); the retried run trained $(wc -l < "$work/retried.jsonl") steps"
    ;;
  cut-short)
    one_node 60 "$work/one_node.jsonl"
    node 1 "$ns1" secret 60 "$work/unused.jsonl" > "$work/node1.out" 2>&1 &
    node1=$!
    node 0 "$ns0" secret 60 "$work/two_nodes.jsonl" > "$work/node0.out" 2>&1 &
    node0=$!
    for _ in $(seq 240); do logged "$work/two_nodes.jsonl" 3 && break; sleep 0.25; done
    at=$(wc -l < "$work/two_nodes.jsonl")
    link down; sleep 5; link up
    rc0=0; wait $node0 || rc0=$?
    rc1=0; wait $node1 || rc1=$?
    [ $rc0 = 0 ] || { echo "FAIL: node 0 exited $rc0 after a 5 s cut"; cat "$work/node0.out"; exit 1; }
    [ $rc1 = 0 ] || { echo "FAIL: node 1 exited $rc1 after a 5 s cut"; cat "$work/node1.out"; exit 1; }
    if ! diff <(losses "$work/one_node.jsonl") <(losses "$work/two_nodes.jsonl"); then
      echo "FAIL: the losses after a 5 s cut differ from the one-node run's"; exit 1
    fi
    echo "PASS: link down 5 s after step $at; 60 steps, losses bitwise equal to 1 node x 8"
    ;;
  cut-long)
    one_node 60 "$work/one_node.jsonl"
    ckpt="$work/ckpt"
    rm -rf "$ckpt"
    node 1 "$ns1" secret 60 "$work/unused.jsonl" --checkpoint-dir "$ckpt" --checkpoint-every 5 > "$work/node1.out" 2>&1 &
    node1=$!
    node 0 "$ns0" secret 60 "$work/cut.jsonl" --checkpoint-dir "$ckpt" --checkpoint-every 5 > "$work/node0.out" 2>&1 &
    node0=$!
    for _ in $(seq 240); do logged "$work/cut.jsonl" 12 && break; sleep 0.25; done
    link down
    cut=$(date +%s)
    rc0=0; wait $node0 || rc0=$?
    rc1=0; wait $node1 || rc1=$?
    took=$(( $(date +%s) - cut ))
    link up
    [ $rc0 != 0 ] && [ $rc1 != 0 ] || { echo "FAIL: a node exited 0 with the link cut (node 0: $rc0, node 1: $rc1)"; exit 1; }
    [ $took -le 90 ] || { echo "FAIL: the nodes took $took s to give up (timeout 20 s)"; exit 1; }
    [ -z "$(ip netns pids "$ns0")$(ip netns pids "$ns1")" ] || { echo "FAIL: processes left after the cut"; exit 1; }
    [ -s "$ckpt/latest" ] || { echo "FAIL: no checkpoint to resume from"; cat "$work/node0.out"; exit 1; }
    saved=$(cat "$ckpt/latest")
    port=$(( port + 1 ))
    node 1 "$ns1" secret 60 "$work/unused2.jsonl" --resume "$ckpt" > "$work/node1b.out" 2>&1 &
    node1=$!
    node 0 "$ns0" secret 60 "$work/resumed.jsonl" --resume "$ckpt" > "$work/node0b.out" 2>&1 ||
      { echo "FAIL: the resumed run failed"; cat "$work/node0b.out"; exit 1; }
    wait $node1 || { cat "$work/node1b.out"; exit 1; }
    # The resumed steps are the one-node run's, bit for bit.
    if ! diff <(losses "$work/one_node.jsonl" | tail -n "$(wc -l < "$work/resumed.jsonl")") <(losses "$work/resumed.jsonl"); then
      echo "FAIL: the resumed losses differ from the uninterrupted run's"; exit 1
    fi
    echo "PASS: link cut after step $(wc -l < "$work/cut.jsonl"); both nodes exited ($rc0, $rc1) within $took s:" \
         "$(grep -m1 -h "failed" "$work/node0.out" | cut -c1-160)"
    echo "      resumed from $saved: $(wc -l < "$work/resumed.jsonl") steps, losses bitwise equal to the uninterrupted run's"
    ;;
  port-taken)
    # Something else (here a plain listening socket) holds the master's port on node 0's address.
    ip netns exec "$ns0" python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('$addr0', $port)); s.listen(8)
time.sleep(300)" &
    holder=$!
    sleep 1
    start=$(date +%s)
    node 1 "$ns1" secret 5 "$work/unused.jsonl" > "$work/node1.out" 2>&1 &
    node1=$!
    rc0=0; node 0 "$ns0" secret 5 "$work/taken.jsonl" > "$work/node0.out" 2>&1 || rc0=$?
    rc1=0; wait $node1 || rc1=$?
    took=$(( $(date +%s) - start ))
    kill $holder 2> /dev/null || true
    [ $rc0 != 0 ] || { echo "FAIL: node 0 trained with its master port taken"; exit 1; }
    [ $rc1 != 0 ] || { echo "FAIL: node 1 trained with the master port taken"; exit 1; }
    grep -qi "port" "$work/node0.out" || { echo "FAIL: node 0 does not say the port is the problem"; cat "$work/node0.out"; exit 1; }
    [ $took -le 90 ] || { echo "FAIL: giving up took $took s (timeout 20 s)"; exit 1; }
    echo "PASS: port $port taken; both nodes exited ($rc0, $rc1) within $took s: $(grep -m1 -i "port" "$work/node0.out" | cut -c1-200)"
    ;;
  slow-link)
    command -v tc > /dev/null || skip "no tc (iproute2)"
    one_node 20 "$work/one_node.jsonl"
    # Every rank records a trace (rank 0 merges and writes it): --trace on both nodes.
    node 1 "$ns1" secret 20 "$work/unused.jsonl" --trace "$work/unused.json" > "$work/node1.out" 2>&1 &
    node 0 "$ns0" secret 20 "$work/fast.jsonl" --trace "$work/fast.json" > "$work/node0.out" 2>&1 || { cat "$work/node0.out"; exit 1; }
    wait $! || { cat "$work/node1.out"; exit 1; }
    tc -n "$ns0" qdisc add dev "$veth0" root tbf rate 10mbit burst 32kbit latency 400ms 2> "$work/tc.err" ||
      skip "tc tbf unavailable: $(cat "$work/tc.err")"
    tc -n "$ns1" qdisc add dev "$veth1" root tbf rate 10mbit burst 32kbit latency 400ms
    port=$(( port + 1 ))
    node 1 "$ns1" secret 20 "$work/unused2.jsonl" --trace "$work/unused2.json" > "$work/node1b.out" 2>&1 &
    node 0 "$ns0" secret 20 "$work/slow.jsonl" --trace "$work/slow.json" > "$work/node0b.out" 2>&1 || { cat "$work/node0b.out"; exit 1; }
    wait $! || { cat "$work/node1b.out"; exit 1; }
    if ! diff <(losses "$work/one_node.jsonl") <(losses "$work/slow.jsonl"); then
      echo "FAIL: the rate-limited run's losses differ from the one-node run's"; exit 1
    fi
    # The pipeline messages between the nodes (stage 0 on node 0, stage 1 on node 1): their
    # receives' total time in the traced steps, without and with the limit.
    recv_ms() { python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))
print(round(sum(e["dur"] for e in t["traceEvents"] if e.get("ph") == "X" and e["args"].get("kind") == "recv") / 1e3, 1))' "$1"; }
    fast=$(recv_ms "$work/fast.json") slow=$(recv_ms "$work/slow.json")
    python3 -c "import sys; sys.exit(0 if $slow > 2 * $fast else 1)" ||
      { echo "FAIL: receives took $slow ms rate-limited, $fast ms without: not slower"; exit 1; }
    echo "PASS: 10 Mbit/s between the nodes: losses bitwise the one-node run's; pipeline receives $fast ms -> $slow ms" \
         "in the traced steps"
    ;;
  mpirun)
    command -v mpirun > /dev/null || skip "no mpirun (bash scripts/setup.sh installs openmpi-bin)"
    one_node 20 "$work/one_node.jsonl"
    # mpirun starts its daemon on a remote host through an rsh agent ("AGENT HOST COMMAND"):
    # this one runs the command in the namespace that holds HOST's address.
    cat > "$work/agent.sh" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in $addr0) ns=$ns0 ;; $addr1) ns=$ns1 ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
    chmod +x "$work/agent.sh"
    # OMP_NUM_THREADS=1 as quintnet launch sets it for 4 ranks on 2 cores (mpirun does not:
    # OpenBLAS would then use 2 threads and sum in another order).
    ip netns exec "$ns0" mpirun --allow-run-as-root --host "$addr0:4,$addr1:4" -np 8 \
      --mca plm_rsh_agent "$work/agent.sh" --mca oob_tcp_if_include "$addr0/24" \
      -x MASTER_ADDR="$addr0" -x MASTER_PORT="$port" -x QN_RUN_TOKEN=secret -x OMP_NUM_THREADS=1 \
      "$bin/quintnet-train" "${train_args[@]}" --max-steps 20 --metrics "$work/mpirun.jsonl" > "$work/mpirun.out" 2>&1 ||
      { echo "FAIL: mpirun across the namespaces failed"; tail -20 "$work/mpirun.out"; exit 1; }
    if ! diff <(losses "$work/one_node.jsonl") <(losses "$work/mpirun.jsonl"); then
      echo "FAIL: mpirun's losses differ from the one-node run's"; exit 1
    fi
    echo "PASS: mpirun --host $addr0:4,$addr1:4 (rsh agent into the namespaces): 20 steps, losses bitwise equal to 1 node x 8"
    ;;
  slurm)
    one_node 20 "$work/one_node.jsonl"
    # What srun sets for task R of 8 on 2 nodes of 4 tasks, and what an sbatch script exports.
    # GLOO_SOCKET_IFNAME names each node's interface toward the other (HARDENING.md's advice
    # where several networks join the nodes).
    task() {  # RANK NS METRICS
      local ifname=$veth0; [ "$2" = "$ns0" ] || ifname=$veth1
      ip netns exec "$2" env GLOO_SOCKET_IFNAME="$ifname" SLURM_PROCID="$1" SLURM_NTASKS=8 SLURM_LOCALID=$(( $1 % 4 )) SLURM_NODEID=$(( $1 / 4 )) \
        SLURM_NTASKS_PER_NODE="4(x2)" SLURM_NNODES=2 MASTER_ADDR="$addr0" MASTER_PORT="$port" QN_RUN_TOKEN=secret \
        OMP_NUM_THREADS=1 \
        "$bin/quintnet-train" "${train_args[@]}" --max-steps 20 --metrics "$3" > "$work/task$1.out" 2>&1
    }
    pids=()
    for r in 0 1 2 3 4 5 6 7; do
      if [ $r -lt 4 ]; then task $r "$ns0" "$work/slurm.jsonl" & else task $r "$ns1" "$work/unused.jsonl" & fi
      pids+=($!)
    done
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || { echo "FAIL: task $i failed"; cat "$work/task$i.out"; exit 1; }; done
    if ! diff <(losses "$work/one_node.jsonl") <(losses "$work/slurm.jsonl"); then
      echo "FAIL: the SLURM-style run's losses differ from the one-node run's"; exit 1
    fi
    echo "PASS: 8 tasks with SLURM's variables across $addr0/$addr1: 20 steps, losses bitwise equal to 1 node x 8"
    ;;
  *) echo "unknown case '$case' (equal, kill-node, wrong-token, cut-short, cut-long, port-taken, slow-link, mpirun, slurm)"; exit 2 ;;
esac
