// The longest sequence (prompt + answer) a tensorrt_llm model's engine takes, read from what its
// config names, for the OpenAI chat routes' default max_tokens (the model's whole remaining
// context, as OpenAI's chat endpoint).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace inflight::server::openai {

// `engine_dir` is the model's engine_dir / gpt_model_path; `model_config` its Triton config as JSON
// (for the build_max_seq_len parameter). An engine folder: its config.json's build.max_seq_len (our
// builder) or build_config.max_seq_len (TensorRT-LLM's). A Hugging Face folder, which the backend
// converts at load: build_max_seq_len when the model sets it, else the builder's default,
// min(max_position_embeddings or GPT-2's n_positions, 2048). nullopt when none of these is found.
std::optional<std::int64_t> EngineMaxSeqLen(const std::string& engine_dir,
                                            const nlohmann::json& model_config);

}  // namespace inflight::server::openai
