#include "sim/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace quintnet::sim {

namespace {

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) _exit(1);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string run_in_child(const std::string& what, const std::function<std::string()>& body) {
  std::fflush(stdout);  // the child must not inherit (and print again) buffered output
  std::fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) throw core::UserError("cannot create a pipe for " + what);
  const pid_t pid = fork();
  if (pid < 0) throw core::UserError("cannot fork a process for " + what + ": " + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    std::string reply;
    try {
      reply = "ok:" + body();
    } catch (const std::exception& e) {
      reply = std::string("error:") + e.what();
    }
    write_all(fds[1], reply);
    std::fflush(stdout);
    _exit(0);
  }
  close(fds[1]);
  std::string reply;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) reply.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    throw core::UserError(what + ": the SimGrid process died (" + strsignal(WTERMSIG(status)) + ")");
  if (reply.rfind("ok:", 0) == 0) return reply.substr(3);
  if (reply.rfind("error:", 0) == 0) throw core::UserError(reply.substr(6));
  throw core::UserError(what + ": the SimGrid process ended without a result");
}

}  // namespace quintnet::sim
