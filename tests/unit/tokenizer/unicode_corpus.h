// Prompts whose characters take several bytes and, in byte-level BPE, often several tokens: the
// streaming tests cut them at every token and check nothing is split or lost.
#pragma once

#include <string>
#include <vector>

namespace inflight::tokenizer::testing {

inline const std::vector<std::string>& UnicodeCorpus() {
  static const std::vector<std::string> corpus = {
      "你好，世界。今天天气很好，我们去公园散步吧！",
      "日本語のテキストとカタカナ、ひらがな。",
      "한국어 텍스트를 스트리밍합니다.",
      // ZWJ sequences, skin tones, flags, keycaps, a variation selector.
      "family: 👨‍👩‍👧‍👦, wave 👋🏽 thumbs 👍🏿",
      "flags 🇫🇷🇯🇵 keycap 1️⃣ heart ❤️",
      "🧑🏾‍🚀 and 🏳️‍🌈 then 😀😃😄",
      // Combining marks: e + U+0301, n + U+0303, stacked diacritics.
      "Cafe\u0301 man\u0303ana Z\u0334\u0321\u032Aa\u0337l\u0338g\u0335o",
      "مرحبا بالعالم، كيف حالك؟",
      "שלום עולם",
      "नमस्ते दुनिया",
      "สวัสดีชาวโลก",
      "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math: ∀x∈ℝ, x² ≥ 0",
      // The space clean-up rules of transformers (Llama-3's tokenizer applies them).
      "I 'm here , don 't you know ? It 's fine . We 've said we 're done ! ' quoted '",
      "mixed: naïve café — “quotes” … ¿qué? ¡sí! 100€ ½",
  };
  return corpus;
}

}  // namespace inflight::tokenizer::testing
