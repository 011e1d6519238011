#pragma once
// StoreBackend — collectives and point-to-point messages through host memory and the
// run's rendezvous store (TCPStore, or the launcher's FileStore): the fallback where
// neither NCCL nor Gloo can serve.
//
// Why it exists: NCCL refuses two ranks on one GPU ("Duplicate GPU detected"; NVIDIA
// says it cannot work, NCCL issue #418), and PyPI's torch ships no Gloo headers to
// build against — so on a machine with one GPU a dp 2, tp 2 or pp 2 run had no backend
// at all.  Here every operation copies its tensors to the host, exchanges their bytes
// through the store and copies the result back: slow (every byte through the store),
// exact, and the same order of additions on every rank (rank 0's part + rank 1's + ...),
// so replicas stay bitwise equal.  For checking layouts on one GPU, not for speed.
//
// Every call completes before it returns (its Work is done): a send only writes its key,
// so it never waits for the receiver; a receive and a collective wait for their peers'
// keys, up to the store's timeout (a silent peer becomes an error, not a hang).
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "exec/comm/c10d_compat.h"

namespace quintnet::exec {

// timeout: how long a receive or collective waits for a peer's key.
c10::intrusive_ptr<CommBackend> make_store_backend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                   std::chrono::milliseconds timeout);

}  // namespace quintnet::exec
