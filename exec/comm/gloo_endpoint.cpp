#include "exec/comm/gloo_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace quintnet::exec {
namespace {

// The local address the kernel picks to reach `host`: a UDP socket connected to it
// (which sends nothing) and asked for its own name.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw core::UserError("MASTER_ADDR " + host + ": cannot resolve it (" + gai_strerror(rc) + ")");
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!ok)
    throw core::UserError("MASTER_ADDR " + host + ": no route to it from this node (" + std::strerror(error) +
                          "); set GLOO_SOCKET_IFNAME to the interface the nodes share");
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

}  // namespace

GlooEndpoint gloo_endpoint(const RankEnv& env) {
  if (env.single_node()) return {"", "127.0.0.1"};
  if (const char* name = std::getenv("GLOO_SOCKET_IFNAME"); name && *name) return {name, ""};
  return {"", local_address_towards(env.master_addr, env.master_port)};
}

}  // namespace quintnet::exec
