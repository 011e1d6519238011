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

// Where and how this node's ranks start (the launcher's options, resolved).
struct LaunchConfig {
  int nproc = 0, nnodes = 1, node_rank = 0, port = 0, grace = 5;
  std::string addr, token;
  std::vector<std::string> command;
};

LaunchConfig read_config(Args& args) {
  LaunchConfig c;
  c.nproc = args.value("nproc") ? args.get_int("nproc", 1, 1, 1024) : args.get_int("nproc-per-node", 0, 1, 1024);
  if (c.nproc == 0) throw UsageError("--nproc N is required (ranks to start on this node)");
  c.nnodes = args.get_int("nnodes", 1, 1, 65536);
  c.node_rank = args.get_int("node-rank", 0, 0, c.nnodes - 1);
  c.addr = args.get("master-addr", "127.0.0.1");
  c.port = args.value("master-port") ? args.get_int("master-port", 29500, 1, 65535)
                                     : (c.nnodes == 1 ? free_port() : 29500);
  c.grace = args.get_int("grace", 5, 0, 3600);
  // The rendezvous only this run's ranks can join: one node meets through a FileStore in
  // a private folder (nothing listens on the network), and every run has a token.
  const char* env_token = std::getenv("QN_RUN_TOKEN");
  c.token = args.get("token", env_token ? env_token : "");
  if (c.token.empty()) {
    if (c.nnodes > 1)
      throw UsageError("--nnodes " + std::to_string(c.nnodes) +
                       ": give every node the same --token T (or QN_RUN_TOKEN), so only this run's ranks can join");
    c.token = random_token();
  }
  c.command = args.positional();
  if (c.command.empty()) throw UsageError("no command to launch; usage: quintnet launch --nproc N [--] COMMAND...");
  c.command[0] = resolve_command(c.command[0]);
  return c;
}

// This node's ranks, started with torchrun's environment.
std::vector<Child> start_ranks(const LaunchConfig& l, const StoreDir* store_dir) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Child> children(l.nproc);
  for (int i = 0; i < l.nproc; ++i) {
    Child& c = children[i];
    c.rank = l.node_rank * l.nproc + i;
    const std::string world = std::to_string(l.nnodes * l.nproc);
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(c.rank)},            {"WORLD_SIZE", world},
        {"LOCAL_RANK", std::to_string(i)},           {"LOCAL_WORLD_SIZE", std::to_string(l.nproc)},
        {"GROUP_RANK", std::to_string(l.node_rank)}, {"GROUP_WORLD_SIZE", std::to_string(l.nnodes)},
        {"ROLE_RANK", std::to_string(c.rank)},       {"ROLE_WORLD_SIZE", world},
        {"ROLE_NAME", "default"},                    {"MASTER_ADDR", l.addr},
        {"MASTER_PORT", std::to_string(l.port)},     {"TORCHELASTIC_RESTART_COUNT", "0"},
        {"TORCHELASTIC_MAX_RESTARTS", "0"},          {"QN_RUN_TOKEN", l.token}};
    if (store_dir) env.push_back({"QN_STORE_DIR", store_dir->path});
    // Unlike torchrun, which sets OMP_NUM_THREADS=1 for several ranks, each rank gets an
    // equal share of the node's cores (at least 1) unless the user set it: CPU ranks
    // compute with intra-op threads, and one thread each would leave cores idle.
    if (!std::getenv("OMP_NUM_THREADS"))
      env.push_back({"OMP_NUM_THREADS", std::to_string(std::max(1u, cores / static_cast<unsigned>(l.nproc)))});
    c.pid = spawn(l.command, env, c.out_fd, c.err_fd);
  }
  return children;
}

// Watches the ranks until all have ended: their output forwarded line by line, the
// first failure stopping the others (SIGTERM, then SIGKILL after the grace time),
// Ctrl-C forwarded once (a second one kills).
class Supervisor {
 public:
  Supervisor(std::vector<Child>& children, int grace) : children_(children), grace_(grace) {}

  int run() {
    for (;;) {
      const bool had_output = forward_output();
      reap();
      escalate();
      bool any_running = false, any_open = false;
      for (auto& c : children_) any_running |= c.running, any_open |= (c.out_fd >= 0 || c.err_fd >= 0);
      if (!any_running && (!any_open || !had_output)) break;
    }
    for (auto& c : children_) {
      flush_lines(c.out_buf, c.rank, std::cout, true);
      flush_lines(c.err_buf, c.rank, std::cerr, true);
    }
    return exit_code();
  }

 private:
  void signal_all(int sig) {
    for (auto& c : children_)
      if (c.running) kill(-c.pid, sig);
  }

  // Polls the ranks' pipes (100 ms at most); false when none is open.
  bool forward_output() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, is stderr)
    for (auto& c : children_) {
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
    return !fds.empty();
  }

  // Exited ranks; the first failure stops the others.
  void reap() {
    for (auto& c : children_) {
      if (!c.running) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && first_failure_ < 0 && forwarded_ == 0) {
        first_failure_ = static_cast<int>(&c - children_.data());
        std::cerr << "quintnet launch: rank " << c.rank << " failed (" << describe_status(status)
                  << "); stopping the other ranks" << std::endl;
        signal_all(SIGTERM);
        signal_all(SIGCONT);  // a stopped rank (SIGSTOP, a debugger) must run to see the SIGTERM
        term_sent_ = Clock::now();
      }
    }
  }

  // Ctrl-C forwarded; SIGKILL once the grace time after a SIGTERM or SIGINT is over.
  void escalate() {
    if (g_interrupts > forwarded_) {
      forwarded_ = g_interrupts;
      signal_all(forwarded_ == 1 ? SIGINT : SIGKILL);
      if (forwarded_ == 1) term_sent_ = Clock::now();
    }
    if (term_sent_ != Clock::time_point{} && !killed_ && Clock::now() - term_sent_ > std::chrono::seconds(grace_)) {
      signal_all(SIGKILL);
      killed_ = true;
    }
  }

  int exit_code() const {
    if (forwarded_ > 0) {
      std::cerr << "quintnet launch: interrupted; all ranks stopped" << std::endl;
      return 130;
    }
    if (first_failure_ < 0) return 0;
    const Child& c = children_[first_failure_];
    std::cerr << "quintnet launch: failed: rank " << c.rank << " (pid " << c.pid << ") ended with "
              << describe_status(c.status) << std::endl;
    return WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2 ? 2 : 1;
  }

  std::vector<Child>& children_;
  int grace_;
  int first_failure_ = -1;  // index into children_
  int forwarded_ = 0;       // interrupts forwarded
  Clock::time_point term_sent_{};
  bool killed_ = false;
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
  const LaunchConfig config = read_config(args);
  std::optional<StoreDir> store_dir;
  if (config.nnodes == 1) store_dir.emplace();
  std::vector<Child> children = start_ranks(config, store_dir ? &*store_dir : nullptr);

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return Supervisor(children, config.grace).run();
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet launch", [&] { return launch(argc, argv); });
}
