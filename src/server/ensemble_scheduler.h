// Runs an ensemble request: each step is an ordinary request to its model, launched when its inputs
// are ready. Tensors flow by name (input_map: step tensor -> ensemble tensor; output_map likewise).
//
// A decoupled (streaming) step forks the data flow: each of its responses gets its own copy of the
// tensors seen so far, runs the downstream steps on it and yields one ensemble response. So
//
//   pre ──> llm (decoupled) ──r0──> post ──> response 0
//                          └─r1──> post ──> response 1 ...   then FINAL, once every step is done.
//
// Limitation: a parallel branch still running beside a decoupled step does not join the forks.
#pragma once

#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model_config.pb.h"
#include "server/server_api.h"

namespace inflight::server {

class Model;

using StepLauncher =
    std::function<Result<std::shared_ptr<InflightRequest>>(InferRequest, ResponseCallback)>;

struct EnsembleStep {
  inference::ModelEnsembling::Step spec;
  inference::ModelConfig model_config;  // the step model's config (declared inputs and outputs)
  bool decoupled = false;
};

class EnsembleScheduler {
 public:
  EnsembleScheduler(Model* ensemble, std::vector<EnsembleStep> steps, StepLauncher launcher);

  // `request` was validated against the ensemble's config.
  Result<std::shared_ptr<InflightRequest>> Infer(InferRequest request, ResponseCallback callback);

  const std::vector<EnsembleStep>& steps() const { return steps_; }
  // Ensemble tensors some step produces (the others can only come from the request).
  // Ensemble tensor → index of the step whose output_map produces it.
  const std::map<std::string, size_t>& produced() const { return produced_; }
  Model* model() const { return model_; }
  const StepLauncher& launcher() const { return launcher_; }

 private:
  Model* model_;
  std::vector<EnsembleStep> steps_;
  std::map<std::string, size_t> produced_;
  StepLauncher launcher_;
};

// Load-time checks: every input_map/output_map key is declared by the step's model, every required
// step input is mapped, every ensemble output is produced by a step.
Status ValidateEnsemble(const inference::ModelConfig& ensemble,
                        const std::vector<EnsembleStep>& steps);

}  // namespace inflight::server
