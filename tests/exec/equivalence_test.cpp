// DP=2, TP=2 and DP×TP=2×2 ViT training against the serial run: the same initial
// weights and data, per-step losses within 1e-5 relative over 10 steps, the same
// parameters after them.  Ranks are real processes started by quintnet-launch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>

#include "exec_test_util.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

struct Outcome {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> params;
};

Outcome train(const std::string& name, const std::string& mesh, int nproc) {
  const std::string config = write_file(name + ".yaml",
                                        "batch_size: 32\ngrad_acc_steps: 2\nlearning_rate: 1e-4\nmax_grad_norm: 1.0\n"
                                        "img_size: 28\npatch_size: 4\nhidden_dim: 64\nn_heads: 4\ndepth: 8\n"
                                        "mesh_dim: " + mesh + "\nmesh_name: ['dp', 'tp', 'pp']\n");
  const std::string dir = ::testing::TempDir() + "/";
  const std::string cmd = bin("quintnet-launch") + " --nproc " + std::to_string(nproc) + " -- " + bin("quintnet-train") +
                          " --config " + config + " --max-steps 10 --no-eval --quiet --threads 1 --metrics " + dir +
                          name + ".jsonl --save-params " + dir + name + ".pt";
  auto r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  Outcome o;
  std::ifstream metrics(dir + name + ".jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto key = line.find("\"loss\": ");
    o.losses.push_back(std::stod(line.substr(key + 8)));
  }
  std::ifstream in(dir + name + ".pt", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  if (!bytes.empty())
    for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
      o.params[kv.key().toStringRef()] = kv.value().toTensor();
  return o;
}

void expect_equivalent(const Outcome& serial, const Outcome& parallel, const std::string& what) {
  ASSERT_EQ(serial.losses.size(), 10u);
  ASSERT_EQ(parallel.losses.size(), 10u) << what;
  for (size_t i = 0; i < serial.losses.size(); ++i)
    EXPECT_NEAR(parallel.losses[i], serial.losses[i], 1e-5 * std::abs(serial.losses[i]))
        << what << " step " << i + 1;
  ASSERT_EQ(parallel.params.size(), serial.params.size()) << what;
  double worst = 0;
  for (const auto& [name, t] : serial.params) {
    ASSERT_TRUE(parallel.params.count(name)) << what << " lacks " << name;
    const torch::Tensor& p = parallel.params.at(name);
    ASSERT_EQ(p.sizes(), t.sizes()) << what << " " << name;
    worst = std::max(worst, (p - t).abs().max().item<double>());
  }
  EXPECT_LT(worst, 1e-5) << what << ": largest parameter difference after 10 steps";
}

class Equivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { serial_ = new Outcome(train("serial", "[1, 1, 1]", 1)); }
  static void TearDownTestSuite() { delete serial_; }
  static Outcome* serial_;
};
Outcome* Equivalence::serial_ = nullptr;

TEST_F(Equivalence, SerialLossFalls) {
  ASSERT_EQ(serial_->losses.size(), 10u);
  EXPECT_LT(serial_->losses.back(), serial_->losses.front());
}

TEST_F(Equivalence, DataParallel2MatchesSerial) { expect_equivalent(*serial_, train("dp2", "[2, 1, 1]", 2), "dp=2"); }

TEST_F(Equivalence, TensorParallel2MatchesSerial) { expect_equivalent(*serial_, train("tp2", "[1, 2, 1]", 2), "tp=2"); }

TEST_F(Equivalence, DataTimesTensorParallel2x2MatchesSerial) {
  expect_equivalent(*serial_, train("dp2tp2", "[2, 2, 1]", 4), "dp=2 x tp=2");
}

}  // namespace
