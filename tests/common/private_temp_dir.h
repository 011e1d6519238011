#pragma once
// Each test process writes its files (configs, checkpoints, traces, captured stderr)
// into a private folder, not straight into /tmp: ::testing::TempDir() reads TEST_TMPDIR,
// so pointing it at a fresh folder covers every test and the ranks they launch. The
// folder is removed when all the process's tests passed and kept, with its path printed,
// when one failed, so a failure can still be looked at. Without this a full ctest run
// left ~15,000 files and several GB in /tmp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace quintnet::testing_util {

class PrivateTempDir {
 public:
  // Call after ::testing::InitGoogleTest and before RUN_ALL_TESTS.
  PrivateTempDir() {
    std::string pattern = ::testing::TempDir() + "quintnet-test-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::perror(("cannot create the tests' private folder " + pattern).c_str());
      std::exit(2);
    }
    path_ = pattern;
    ::setenv("TEST_TMPDIR", path_.c_str(), 1);
  }
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;

  // The process's exit code: RUN_ALL_TESTS()'s, after the folder is removed or kept.
  int finish(int tests_exit_code) {
    if (tests_exit_code == 0) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    } else {
      std::fprintf(stderr, "test files kept in %s\n", path_.c_str());
    }
    return tests_exit_code;
  }

 private:
  std::string path_;
};

}  // namespace quintnet::testing_util
