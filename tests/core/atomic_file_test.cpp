// core::write_file_atomically: the new contents replace the old whole, nothing is left
// beside the file, and a file that cannot be written is named with the system's reason.
// (That every write is fsynced, file and directory, is checked by hand with strace in
// docs/HARDENING.md: a test cannot pull the power.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace fs = std::filesystem;
using quintnet::core::UserError;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/atomic_" + std::to_string(getpid()) + "_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(AtomicFile, ReplacesTheOldContentsWholeAndLeavesNothingBeside) {
  const std::string d = fresh_dir("replace");
  const std::string path = d + "/result.json";
  quintnet::core::write_file_atomically(path, std::string(1 << 20, 'a'));
  quintnet::core::write_file_atomically(path, "short");
  EXPECT_EQ(read_all(path), "short");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFile, AFileThatCannotBeWrittenIsNamedWithTheReason) {
  const std::string path = fresh_dir("missing") + "/no/such/folder/out.json";
  try {
    quintnet::core::write_file_atomically(path, "x");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, MoveIntoPlaceRenamesAFinishedFile) {
  const std::string d = fresh_dir("move");
  std::ofstream(d + "/picture.tmp.png") << "png bytes";
  quintnet::core::move_into_place(d + "/picture.tmp.png", d + "/picture.png");
  EXPECT_EQ(read_all(d + "/picture.png"), "png bytes");
  EXPECT_FALSE(fs::exists(d + "/picture.tmp.png"));
}
