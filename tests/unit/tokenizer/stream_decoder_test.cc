// Streaming detokenization with the real GPT-2 and Llama-3 tokenizers: the streamed pieces, put
// together, equal the decoding of all the ids, for every cut.
#include "tokenizer/stream_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/token_boundary.h"
#include "common/utf8.h"
#include "unit/tokenizer/test_data.h"
#include "unit/tokenizer/unicode_corpus.h"

namespace inflight::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(SettledLengthTest, HoldsOnlyWhatTheNextBytesCanStillChange) {
  EXPECT_EQ(SettledLength("abc", false), 3u);
  EXPECT_EQ(SettledLength("", false), 0u);
  EXPECT_EQ(SettledLength("a\xE4\xBD", false), 1u);     // 你 without its last byte
  EXPECT_EQ(SettledLength("\xE4\xBD\xA0", false), 3u);  // 你
  EXPECT_EQ(SettledLength("\xF0\x9F\x98", false), 0u);  // 😀 without its last byte
  EXPECT_EQ(SettledLength("x\xF0", false), 1u);         // a lone lead byte may grow
  EXPECT_EQ(SettledLength("\x80", false), 1u);          // a stray continuation never will
  EXPECT_EQ(SettledLength("\xE4\x41", false), 2u);      // cut short by 'A': U+FFFD already
  EXPECT_EQ(SettledLength("\xE0\x80", false), 2u);      // overlong: ill-formed at once
  EXPECT_EQ(SettledLength("\xC3\xA9\xE4", false), 2u);  // é then a new lead byte
  // Spaces matter only with the clean-up, and only among the last 3 bytes.
  EXPECT_EQ(SettledLength("hello ", false), 6u);
  EXPECT_EQ(SettledLength("hello ", true), 5u);
  EXPECT_EQ(SettledLength("x 'v", true), 1u);   // may become " 've"
  EXPECT_EQ(SettledLength("x 'ab", true), 5u);  // no rule is that long
  EXPECT_EQ(SettledLength("x  y", true), 1u);   // each space in turn
  EXPECT_EQ(SettledLength("a \xE4\xBD", true), 1u);
}

struct TokenizerCase {
  const char* name;
  std::string (*dir)();
};

class StreamDecoderTest : public ::testing::TestWithParam<TokenizerCase> {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load(GetParam().dir());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = std::move(t).value();
  }

  std::vector<int32_t> Encode(const std::string& text) {
    auto ids = tokenizer_->Encode(text, false);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  std::string Decode(const std::vector<int32_t>& ids, bool skip = true) {
    auto text = tokenizer_->Decode(ids, skip);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? *text : std::string();
  }

  // Streams `ids` in chunks of the given sizes (cycled); returns the pieces, the last from Finish.
  std::vector<std::string> Stream(const std::vector<int32_t>& ids, const std::vector<size_t>& sizes,
                                  bool skip = true) {
    StreamDecoder decoder(*tokenizer_, skip);
    std::vector<std::string> pieces;
    size_t pos = 0;
    for (size_t i = 0; pos < ids.size(); ++i) {
      const size_t n = std::min(sizes[i % sizes.size()], ids.size() - pos);
      auto piece = decoder.Push(std::span<const int32_t>(ids).subspan(pos, n));
      EXPECT_TRUE(piece.ok()) << piece.status().ToString();
      pieces.push_back(piece.ok() ? *piece : std::string());
      pos += n;
    }
    pieces.push_back(decoder.Finish());
    std::string all;
    for (const auto& p : pieces) all += p;
    EXPECT_EQ(decoder.text(), all);
    return pieces;
  }

  // The ids of each byte of `text` as its own byte-level token (Llama-3's and GPT-2's 256 byte
  // tokens: what a model emits when it spells a character byte by byte).
  std::vector<int32_t> ByteTokens(const std::string& text) {
    std::vector<int32_t> ids;
    for (char c : text) {
      auto id = tokenizer_->TokenToId(ByteLevelEncode(std::string(1, c)));
      EXPECT_TRUE(id.has_value()) << "no byte token for " << static_cast<int>(c);
      if (id) ids.push_back(*id);
    }
    return ids;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(StreamDecoderTest, EveryCorpusPromptStreamsToItsWholeDecoding) {
  std::mt19937 rng(2024);
  for (const std::string& text : testing::UnicodeCorpus()) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> ids = Encode(text);
    const std::string whole = Decode(ids);
    ASSERT_EQ(FindInvalidUtf8(whole), std::nullopt);
    // One token per response (the usual stream), then random chunk sizes.
    std::vector<std::vector<size_t>> cuts = {{1}, {2}, {3, 1}};
    std::uniform_int_distribution<size_t> size(1, 4);
    std::vector<size_t> random_sizes;
    for (int i = 0; i < 64; ++i) random_sizes.push_back(size(rng));
    cuts.push_back(random_sizes);
    for (const auto& sizes : cuts) {
      std::string streamed;
      for (const std::string& piece : Stream(ids, sizes)) {
        // A whole text has no U+FFFD: a piece that had one would have split a character.
        EXPECT_EQ(piece.find(kFffd), std::string::npos) << "piece \"" << piece << "\"";
        EXPECT_EQ(FindInvalidUtf8(piece), std::nullopt);
        streamed += piece;
      }
      EXPECT_EQ(streamed, whole);
    }
  }
}

TEST_P(StreamDecoderTest, ByteByByteTokensStreamWholeCharacters) {
  for (const std::string& text : testing::UnicodeCorpus()) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> ids = ByteTokens(text);
    ASSERT_EQ(ids.size(), text.size());
    std::string streamed;
    for (const std::string& piece : Stream(ids, {1})) {
      EXPECT_EQ(piece.find(kFffd), std::string::npos) << "piece \"" << piece << "\"";
      streamed += piece;
    }
    EXPECT_EQ(streamed, Decode(ids));
  }
}

TEST_P(StreamDecoderTest, AStreamEndingInsideACharacterEndsAsDecodeDoes) {
  // 😀 = F0 9F 98 80 without its last byte, after "ok".
  std::vector<int32_t> ids = ByteTokens("ok\xF0\x9F\x98");
  const auto pieces = Stream(ids, {1});
  EXPECT_EQ(pieces.back(), kFffd);  // Finish gives what Decode gives for the cut-short bytes
  std::string streamed;
  for (const auto& p : pieces) streamed += p;
  EXPECT_EQ(streamed, Decode(ids));
  EXPECT_EQ(streamed, "ok" + kFffd);
}

TEST_P(StreamDecoderTest, SpecialTokensInsideTheStreamFollowSkipSpecialTokens) {
  const auto eos = tokenizer_->eos_id();
  ASSERT_TRUE(eos.has_value());
  std::vector<int32_t> ids = ByteTokens("\xE4\xBD");
  ids.push_back(*eos);  // a special token inside 你
  auto tail = ByteTokens("\xA0 end");
  ids.insert(ids.end(), tail.begin(), tail.end());
  for (bool skip : {true, false}) {
    std::string streamed;
    for (const auto& p : Stream(ids, {1}, skip)) streamed += p;
    EXPECT_EQ(streamed, Decode(ids, skip)) << "skip_special_tokens " << skip;
  }
}

TEST_P(StreamDecoderTest, TokenBoundaryCutsThatDecodeAloneToTheWholeText) {
  // The LLM model's side (token_boundary.h): responses carry only the ids it lets through, and the
  // postprocessing model decodes each response alone.
  for (const std::string& text : testing::UnicodeCorpus()) {
    SCOPED_TRACE(text);
    for (const std::vector<int32_t>& ids : {Encode(text), ByteTokens(text)}) {
      for (bool skip : {true, false}) {
        TokenBoundary boundary(*tokenizer_);
        std::vector<int32_t> held;
        std::string streamed;
        for (int32_t id : ids) {
          held.push_back(id);
          const size_t n = boundary.Push(std::span<const int32_t>(&id, 1));
          ASSERT_LE(n, held.size());
          const std::vector<int32_t> response(held.begin(), held.begin() + n);
          held.erase(held.begin(), held.begin() + n);
          const std::string piece = Decode(response, skip);
          EXPECT_EQ(piece.find(kFffd), std::string::npos) << "piece \"" << piece << "\"";
          streamed += piece;
        }
        EXPECT_EQ(boundary.held(), held.size());
        streamed += Decode(held, skip);  // the final response carries the rest
        EXPECT_EQ(streamed, Decode(ids, skip));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StreamDecoderTest,
                         ::testing::Values(TokenizerCase{"gpt2", &testing::Gpt2Dir},
                                           TokenizerCase{"llama3", &testing::Llama3Dir}),
                         [](const auto& info) { return std::string(info.param.name); });

// The case of the bug report, on GPT-2: 你 is ids 19526 ("ä½" = E4 BD) and 254 (A0).
TEST(StreamDecoderGpt2Test, SplitCharacterStreamsWhole) {
  auto t = Tokenizer::Load(testing::Gpt2Dir());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  StreamDecoder decoder(**t, true);
  const int32_t first = 19526, second = 254;
  auto a = decoder.Push(std::span<const int32_t>(&first, 1));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, "");
  auto b = decoder.Push(std::span<const int32_t>(&second, 1));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "\xE4\xBD\xA0");
  EXPECT_EQ(decoder.Finish(), "");

  TokenBoundary boundary(**t);
  EXPECT_EQ(boundary.Push(std::span<const int32_t>(&first, 1)), 0u);
  EXPECT_EQ(boundary.Push(std::span<const int32_t>(&second, 1)), 2u);
  EXPECT_EQ(boundary.held(), 0u);

  const int32_t bad = (*t)->vocab_size();
  EXPECT_FALSE(decoder.Push(std::span<const int32_t>(&bad, 1)).ok());
}

}  // namespace
}  // namespace inflight::tokenizer
