// libFuzzer target: encode and decode with the real GPT-2 and Llama-3 tokenizers (.testdata, or
// $INFLIGHT_TEST_DATA): fuzzed text through Encode, fuzzed id lists through Decode and the
// StreamDecoder; the properties are in tokenizer_fuzz_checks.h.
//
// Input: byte 0 bit 0 picks the tokenizer (GPT-2, Llama-3), bit 1 text or ids, bit 2
// skip_special_tokens / add_special_tokens, bit 3 raw int32 ids (else ids near the vocabulary),
// bits 4-7 the StreamDecoder's piece size. Ids are 4 bytes each, little-endian.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer_fuzz_checks.h"

namespace {

using inflight::tokenizer::Tokenizer;

std::unique_ptr<Tokenizer> LoadOrDie(const std::string& dir) {
  auto tokenizer = Tokenizer::Load(dir);
  if (!tokenizer.ok()) {
    inflight::tokenizer::fuzz::Fail("cannot load " + dir +
                                    " (fetch it with "
                                    "tools/fetch_test_data.sh): " +
                                    tokenizer.status().message());
  }
  return std::move(tokenizer).value();
}

std::unique_ptr<Tokenizer> g_tokenizers[2];

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("INFLIGHT_TEST_DATA");
  const std::string dir = env != nullptr ? env : INFLIGHT_DEFAULT_TEST_DATA;
  g_tokenizers[0] = LoadOrDie(dir + "/gpt2");
  g_tokenizers[1] = LoadOrDie(dir + "/llama3");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Tokenizer& tokenizer = *g_tokenizers[data[0] & 1];
  const bool special = data[0] & 4;
  const char* rest = reinterpret_cast<const char*>(data) + 1;
  const std::size_t rest_size = size - 1;
  if ((data[0] & 2) == 0) {
    inflight::tokenizer::fuzz::CheckEncode(tokenizer, std::string_view(rest, rest_size), special,
                                           /*complete=*/true);
    return 0;
  }
  std::vector<int32_t> ids(rest_size / 4);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    uint32_t raw;
    std::memcpy(&raw, rest + 4 * i, 4);
    if (data[0] & 8) {
      ids[i] = static_cast<int32_t>(raw);
    } else {
      // Mostly valid ids, with a few on each side of the range.
      const int64_t span = int64_t{tokenizer.vocab_size()} + 8;
      ids[i] = static_cast<int32_t>(int64_t{raw % static_cast<uint32_t>(span)} - 4);
    }
  }
  const std::size_t piece = (data[0] >> 4) + 1;
  inflight::tokenizer::fuzz::CheckDecode(tokenizer, ids, special, piece);
  return 0;
}
