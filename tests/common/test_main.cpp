// The main of the gtest programs: gtest_main's, plus a private temporary folder
// (common/private_temp_dir.h) so the tests leave nothing behind in /tmp.
#include <gtest/gtest.h>

#include "common/private_temp_dir.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  quintnet::testing_util::PrivateTempDir temp_dir;
  return temp_dir.finish(RUN_ALL_TESTS());
}
