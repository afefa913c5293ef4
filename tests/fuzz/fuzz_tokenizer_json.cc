// libFuzzer target: a Hugging Face tokenizer.json from fuzzed bytes through Tokenizer::Load (the
// same loading a model's tokenizer_dir gets), and a tokenizer that loads through encode and decode
// (tokenizer_fuzz_checks.h) of a few texts and of every id near its vocabulary.
//
// The bytes are written to tokenizer.json in a directory of this process's own, since Load reads
// a folder.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer_fuzz_checks.h"

namespace {

using inflight::tokenizer::Tokenizer;
namespace fuzz = inflight::tokenizer::fuzz;

std::string g_dir;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/fuzz_tokenizer_json.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) fuzz::Fail("cannot create a directory " + pattern);
  g_dir = pattern;
  std::atexit([] {
    unlink((g_dir + "/tokenizer.json").c_str());
    rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(g_dir + "/tokenizer.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) fuzz::Fail("cannot write " + g_dir + "/tokenizer.json");
  }
  auto tokenizer = Tokenizer::Load(g_dir);
  if (!tokenizer.ok()) {
    if (tokenizer.status().message().empty()) fuzz::Fail("load error without a message");
    return 0;
  }
  const Tokenizer& t = **tokenizer;
  for (const char* text : {"", "Hello world", "  a\n\tb  ", "héllo 你好 🙂", "<s> x</s>"}) {
    fuzz::CheckEncode(t, text, false, /*complete=*/false);
    fuzz::CheckEncode(t, text, true, /*complete=*/false);
  }
  std::vector<int32_t> ids;
  for (int32_t id = -2; id < t.vocab_size() + 2 && id < 512; ++id) ids.push_back(id);
  for (int32_t id : ids) fuzz::CheckDecode(t, std::span<const int32_t>(&id, 1), false, 1);
  // All valid ids at once, streamed in pieces of 3.
  std::vector<int32_t> valid;
  for (int32_t id : ids) {
    if (id >= 0 && id < t.vocab_size() && t.Decode(std::span<const int32_t>(&id, 1), false).ok()) {
      valid.push_back(id);
    }
  }
  fuzz::CheckDecode(t, valid, false, 3);
  fuzz::CheckDecode(t, valid, true, 3);
  return 0;
}
