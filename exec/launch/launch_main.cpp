// quintnet-launch: start the local ranks of a job with the torchrun environment.
//
//   quintnet launch --nproc 4 -- quintnet-train --config plan.yaml
//   quintnet launch --nproc_per_node 4 quintnet-train --config plan.yaml   (torchrun's spelling)
//
// Every rank's output is prefixed with "[rank N]".  Ctrl-C is forwarded to all ranks.
// When a rank fails, the others are stopped (SIGTERM, then SIGKILL after --grace
// seconds) and the launcher exits non-zero naming the rank and its exit status: 2 when
// the failing rank reported a user error (exit 2), else 1.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/error.h"
#include "core/install_layout.h"

namespace {

using quintnet::core::cli::Args;
using quintnet::core::cli::OptionSpec;
using quintnet::core::cli::UsageError;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_interrupts = 0;
void on_interrupt(int) { ++g_interrupts; }

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool running = true;
  int status = 0;
};

// A free TCP port on this machine, so concurrent single-node jobs do not collide.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

// Writes complete lines of `buf` with the rank prefix; a '\r' (progress bars) is kept.
void flush_lines(std::string& buf, int rank, std::ostream& os, bool final) {
  size_t start = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] == '\n' || buf[i] == '\r') {
      os << "[rank " << rank << "] " << buf.substr(start, i - start) << buf[i];
      start = i + 1;
    }
  }
  buf.erase(0, start);
  if (final && !buf.empty()) {
    os << "[rank " << rank << "] " << buf << '\n';
    buf.clear();
  }
  os.flush();
}

bool drain(int& fd, std::string& buf) {
  if (fd < 0) return false;
  char tmp[4096];
  ssize_t n = read(fd, tmp, sizeof(tmp));
  if (n > 0) {
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    close(fd);
    fd = -1;
  }
  return false;
}

pid_t spawn(const std::vector<std::string>& cmd, const std::vector<std::pair<std::string, std::string>>& env,
            int& out_fd, int& err_fd) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe failed");
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);                   // its own group: Ctrl-C is forwarded, not broadcast
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher dying takes the ranks with it
    if (getppid() != parent) _exit(1);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "quintnet launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(out[1]), close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  out_fd = out[0];
  err_fd = err[0];
  return pid;
}

// A bare command name (quintnet-train) is looked up next to this launcher first, so
// `build/bin/quintnet launch ... -- quintnet-train` works without PATH changes.
std::string resolve_command(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const std::string here = quintnet::core::executable_dir() + "/" + name;
  return access(here.c_str(), X_OK) == 0 ? here : name;
}

// 128 random bits as hex: the run's token (docs/HARDENING.md).
std::string random_token() {
  unsigned char bytes[16];
  FILE* f = std::fopen("/dev/urandom", "rb");
  if (!f || std::fread(bytes, 1, sizeof(bytes), f) != sizeof(bytes))
    throw quintnet::core::UserError("cannot read /dev/urandom for the run's token; give one with --token");
  std::fclose(f);
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", b);
    hex += two;
  }
  return hex;
}

// The private folder of a one-node run's FileStore: 0700 (mkdtemp), removed at the end.
struct StoreDir {
  std::string path;
  StoreDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "quintnet-run-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw quintnet::core::UserError("cannot create the run's private folder in " + pattern);
    path = pattern;
  }
  ~StoreDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::vector<OptionSpec> kOptions = {
    {"nproc", "N", "ranks to start on this node (alias --nproc-per-node; torchrun's --nproc_per_node works too)"},
    {"nproc-per-node", "N", "same as --nproc"},
    {"nnodes", "K", "number of nodes [1]"},
    {"node-rank", "R", "index of this node [0]"},
    {"master-addr", "ADDR", "address of rank 0's node [127.0.0.1]"},
    {"master-port", "PORT", "rendezvous port [a free port on one node, 29500 on several]"},
    {"token", "T",
     "the run's secret: ranks started with another token cannot join [random on one node; on several, the same "
     "--token or QN_RUN_TOKEN on every node]"},
    {"grace", "SECONDS", "time a rank gets to exit after SIGTERM before SIGKILL [5]"},
};

int launch(int argc, char** argv) {
  Args args("quintnet launch", kOptions, argc, argv, /*options_end_at_command=*/true);
  if (args.help_requested()) {
    std::cout << args.usage("--nproc N [--nnodes K --node-rank R --master-addr A --master-port P] [--] COMMAND...")
              << "\nStarts N ranks running COMMAND with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,\n"
                 "LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,\n"
                 "MASTER_PORT). Options may be spelled as torchrun spells them (--nproc_per_node,\n"
                 "--node_rank, --master_addr, --master_port); everything from COMMAND on is COMMAND's.\n"
                 "If a rank fails the others are stopped and the launcher exits non-zero naming the rank.\n";
    return 0;
  }
  const int nproc = args.value("nproc") ? args.get_int("nproc", 1, 1, 1024) : args.get_int("nproc-per-node", 0, 1, 1024);
  if (nproc == 0) throw UsageError("--nproc N is required (ranks to start on this node)");
  const int nnodes = args.get_int("nnodes", 1, 1, 65536);
  const int node_rank = args.get_int("node-rank", 0, 0, nnodes - 1);
  const std::string addr = args.get("master-addr", "127.0.0.1");
  const int port = args.value("master-port") ? args.get_int("master-port", 29500, 1, 65535)
                                             : (nnodes == 1 ? free_port() : 29500);
  const int grace = args.get_int("grace", 5, 0, 3600);
  // The rendezvous only this run's ranks can join: one node meets through a FileStore in
  // a private folder (nothing listens on the network), and every run has a token.
  const char* env_token = std::getenv("QN_RUN_TOKEN");
  std::string token = args.get("token", env_token ? env_token : "");
  if (token.empty()) {
    if (nnodes > 1)
      throw UsageError("--nnodes " + std::to_string(nnodes) +
                       ": give every node the same --token T (or QN_RUN_TOKEN), so only this run's ranks can join");
    token = random_token();
  }
  std::optional<StoreDir> store_dir;
  if (nnodes == 1) store_dir.emplace();
  std::vector<std::string> cmd = args.positional();
  if (cmd.empty()) throw UsageError("no command to launch; usage: quintnet launch --nproc N [--] COMMAND...");
  cmd[0] = resolve_command(cmd[0]);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Child> children(nproc);
  for (int i = 0; i < nproc; ++i) {
    Child& c = children[i];
    c.rank = node_rank * nproc + i;
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(c.rank)},          {"WORLD_SIZE", std::to_string(nnodes * nproc)},
        {"LOCAL_RANK", std::to_string(i)},         {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
        {"GROUP_RANK", std::to_string(node_rank)}, {"GROUP_WORLD_SIZE", std::to_string(nnodes)},
        {"ROLE_RANK", std::to_string(c.rank)},     {"ROLE_WORLD_SIZE", std::to_string(nnodes * nproc)},
        {"ROLE_NAME", "default"},                  {"MASTER_ADDR", addr},
        {"MASTER_PORT", std::to_string(port)},     {"TORCHELASTIC_RESTART_COUNT", "0"},
        {"TORCHELASTIC_MAX_RESTARTS", "0"},        {"QN_RUN_TOKEN", token}};
    if (store_dir) env.push_back({"QN_STORE_DIR", store_dir->path});
    // Unlike torchrun, which sets OMP_NUM_THREADS=1 for several ranks, each rank gets an
    // equal share of the node's cores (at least 1) unless the user set it: CPU ranks
    // compute with intra-op threads, and one thread each would leave cores idle.
    if (!std::getenv("OMP_NUM_THREADS"))
      env.push_back({"OMP_NUM_THREADS", std::to_string(std::max(1u, cores / static_cast<unsigned>(nproc)))});
    c.pid = spawn(cmd, env, c.out_fd, c.err_fd);
  }

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  int first_failure = -1;  // index into children
  int forwarded = 0;
  Clock::time_point term_sent{};
  bool killed = false;
  auto signal_all = [&](int sig) {
    for (auto& c : children)
      if (c.running) kill(-c.pid, sig);
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, is stderr)
    for (auto& c : children) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0}), owners.push_back({&c, false});
      if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0}), owners.push_back({&c, true});
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *owners[i].first;
      const bool is_err = owners[i].second;
      while (drain(is_err ? c.err_fd : c.out_fd, is_err ? c.err_buf : c.out_buf)) {
      }
      flush_lines(is_err ? c.err_buf : c.out_buf, c.rank, is_err ? std::cerr : std::cout, false);
    }

    // Reap exited ranks.
    for (auto& c : children) {
      if (!c.running) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.running = false;
        c.status = status;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && first_failure < 0 && forwarded == 0) {
          first_failure = static_cast<int>(&c - children.data());
          std::cerr << "quintnet launch: rank " << c.rank << " failed (" << describe_status(status)
                    << "); stopping the other ranks" << std::endl;
          signal_all(SIGTERM);
          signal_all(SIGCONT);  // a stopped rank (SIGSTOP, a debugger) must run to see the SIGTERM
          term_sent = Clock::now();
        }
      }
    }
    // Ctrl-C: forward once as SIGINT; a second one kills.
    if (g_interrupts > forwarded) {
      forwarded = g_interrupts;
      signal_all(forwarded == 1 ? SIGINT : SIGKILL);
      if (forwarded == 1) term_sent = Clock::now();
    }
    if (term_sent != Clock::time_point{} && !killed && Clock::now() - term_sent > std::chrono::seconds(grace)) {
      signal_all(SIGKILL);
      killed = true;
    }

    bool any_running = false, any_open = false;
    for (auto& c : children) any_running |= c.running, any_open |= (c.out_fd >= 0 || c.err_fd >= 0);
    if (!any_running && !any_open) break;
    if (!any_running && fds.empty()) break;
  }
  for (auto& c : children) {
    flush_lines(c.out_buf, c.rank, std::cout, true);
    flush_lines(c.err_buf, c.rank, std::cerr, true);
  }

  if (forwarded > 0) {
    std::cerr << "quintnet launch: interrupted; all ranks stopped" << std::endl;
    return 130;
  }
  if (first_failure >= 0) {
    const Child& c = children[first_failure];
    std::cerr << "quintnet launch: failed: rank " << c.rank << " (pid " << c.pid << ") ended with "
              << describe_status(c.status) << std::endl;
    return WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2 ? 2 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet launch", [&] { return launch(argc, argv); });
}
