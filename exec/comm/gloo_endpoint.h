#pragma once
// Where a rank's Gloo connections listen, so that the other ranks can reach them.
//   One node: 127.0.0.1 — nothing listens on the network.
//   Several nodes: the interface named by GLOO_SOCKET_IFNAME when it is set (PyTorch's
//   variable, honoured the same way), else this host's address on its route to
//   MASTER_ADDR — the interface the other nodes reach this one through.  c10d's own
//   default, the address the hostname resolves to, is on Debian 127.0.1.1 (/etc/hosts)
//   and elsewhere often another network's; the peers then cannot connect and the run
//   hangs until the timeout (found by tests/multinode/: two network namespaces).
#include <string>

#include "exec/launch/rank_env.h"

namespace quintnet::exec {

struct GlooEndpoint {
  std::string interface;  // an interface name (GLOO_SOCKET_IFNAME), or
  std::string address;    // an address of this host to bind
  std::string describe() const { return interface.empty() ? address : "interface " + interface; }
};

// Throws core::UserError when MASTER_ADDR cannot be resolved or routed to.
GlooEndpoint gloo_endpoint(const RankEnv& env);

}  // namespace quintnet::exec
