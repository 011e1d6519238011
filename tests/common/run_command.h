#pragma once
// Running QuintNet executables from tests, as a user would: exit code, stdout,
// stderr and wall time of a shell command.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace quintnet::testing_util {

struct CommandResult {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

inline CommandResult run_command(const std::string& cmd) {
  static int counter = 0;
  // The process id keeps the file apart from other test processes (ctest -j).
  const std::string err_path =
      ::testing::TempDir() + "/exec_stderr_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".txt";
  CommandResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* pipe = popen((cmd + " 2>" + err_path).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

inline std::string bin(const std::string& name) { return std::string(QN_BIN_DIR) + "/" + name; }

inline std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace quintnet::testing_util
