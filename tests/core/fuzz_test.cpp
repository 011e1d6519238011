// Malformed configs and traces never crash: every mutated input either loads or
// fails with the typed user error (exit 2 in the executables).
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "core/error.h"
#include "core/plan.h"
#include "core/trace.h"

using namespace quintnet::core;

namespace {

const char* kTokens[] = {"99999999999999999999999999", "-1", "1e308", "-1e308", "0", "null", "\"x\"", "[", "]",
                         "{", "}", ":", ",", "true", "'", "\"", "NaN", "\xff\xfe", "[[[[[[[[", "- ", "\n", "&a *a"};

// One random edit: truncate, flip a byte, delete a span, or insert a nasty token.
std::string mutate(const std::string& text, std::mt19937& rng) {
  std::string s = text;
  std::uniform_int_distribution<size_t> pos(0, s.empty() ? 0 : s.size() - 1);
  switch (rng() % 4) {
    case 0: s.resize(pos(rng)); break;
    case 1:
      if (!s.empty()) s[pos(rng)] = static_cast<char>(rng() % 256);
      break;
    case 2: {
      size_t a = pos(rng);
      s.erase(a, rng() % 16);
      break;
    }
    default: s.insert(pos(rng), kTokens[rng() % (sizeof(kTokens) / sizeof(*kTokens))]); break;
  }
  return s;
}

const std::string kConfig =
    "batch_size: 32\nnum_epochs: 10\nlearning_rate: 1e-4\ngrad_acc_steps: 2\nmax_grad_norm: 1.0\n"
    "img_size: 28\npatch_size: 4\nhidden_dim: 64\nin_channels: 1\nn_heads: 4\ndepth: 8\n"
    "mesh_dim: [2, 2, 2]\nmesh_name: ['dp', 'tp', 'pp']\nstrategy_name: '3d'\nschedule: '1f1b'\n"
    "model_config: {n_layer: 2}\n";
const std::string kJsonConfig =
    R"({"batch_size": 32, "grad_acc_steps": 2, "mesh_dim": [2, 2, 2], "learning_rate": 1e-4, "depth": 8})";

}  // namespace

TEST(Fuzz, MutatedConfigsLoadOrFailWithConfigError) {
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = i % 2 ? kConfig : kJsonConfig;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) text = mutate(text, rng);
    try {
      parse_plan_text(text, "fuzz.yaml");
    } catch (const ConfigError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected " << typeid(e).name() << ": " << e.what() << "\ninput:\n" << text;
    }
  }
  EXPECT_GT(rejected, 100);  // the mutations do break configs
}

TEST(Fuzz, MutatedTracesLoadOrFailWithTraceError) {
  Trace t;
  t.source = "sim";
  t.ranks = {{0, 0, 0}, {0, 0, 1}};
  t.events.push_back({"F0", "forward", 0, Lane::Compute, 0, 10, 0, 0, 0, 0, -1});
  t.events.push_back({"F0", "forward", 1, Lane::Compute, 12, 10, 0, 0, 0, 0, -1});
  t.flows.push_back({1, 0, Lane::P2P, 10, 1, Lane::P2P, 12});
  const std::string text = trace_to_json(t).dump();
  std::mt19937 rng(99);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = text;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) s = mutate(s, rng);
    try {
      parse_trace_text(s, "fuzz.json");
    } catch (const TraceError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected " << typeid(e).name() << ": " << e.what() << "\ninput:\n" << s;
    }
  }
  EXPECT_GT(rejected, 100);
}

// The reader's fast scanner must read exactly what the checked document path reads:
// for mutated traces, both accept with the same Trace or both refuse.  The base trace
// has names with escapes and non-ASCII text, flows, metadata, and extra fields, so the
// mutations cross every branch between the scanner and the fallbacks.
TEST(Fuzz, FastTraceReaderAgreesWithTheDocumentPath) {
  Trace t;
  t.source = "exec";
  t.ranks = {{0, 0, 0}, {1, 0, 1}};
  t.events.push_back({"F0", "forward", 0, Lane::Compute, 0.5, 10, 3, 0, 1, 0, -1});
  t.events.push_back({"F\"0\" \u00e9", "forward", 1, Lane::Compute, 12, 1e-3, 3, 0, 1, 0, -1});
  t.events.push_back({"SEND_ACT 0", "send", 0, Lane::P2P, 10.25, 2, 3, 0, 1, 4096, 1});
  t.flows.push_back({1, 0, Lane::P2P, 10, 1, Lane::P2P, 12});
  nlohmann::json doc = trace_to_json(t);
  doc["traceEvents"].push_back({{"ph", "i"}, {"name", "marker"}, {"pid", 0}, {"tid", 0}, {"ts", 3}, {"s", "g"}});
  doc["traceEvents"][3]["extra"] = {1, 2};  // a nested value the scanner hands on
  const std::string text = doc.dump(2);      // indented: whitespace everywhere
  std::mt19937 rng(7);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string s = text;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 2); k < n; ++k) s = mutate(s, rng);
    std::optional<Trace> fast, checked;
    try {
      fast = parse_trace_text(s, "fuzz.json");
    } catch (const TraceError&) {
    }
    try {
      checked = trace_from_json(nlohmann::json::parse(s), "fuzz.json");
    } catch (const std::exception&) {  // a syntax error or a TraceError
    }
    ASSERT_EQ(fast.has_value(), checked.has_value()) << "input:\n" << s;
    if (!fast) {
      ++rejected;
      continue;
    }
    ++accepted;
    EXPECT_EQ(fast->events, checked->events) << "input:\n" << s;
    EXPECT_EQ(fast->flows, checked->flows) << "input:\n" << s;
    EXPECT_EQ(fast->ranks, checked->ranks) << "input:\n" << s;
    EXPECT_EQ(fast->source, checked->source) << "input:\n" << s;
  }
  EXPECT_GT(accepted, 400);
  EXPECT_GT(rejected, 300);
}
