#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace inflight::executor {

// Where the executor loop's time goes, step by step: host work the GPU waits for shows up as the
// gap between a step's wall time and its device wait. Off unless INFLIGHT_STEP_PROFILE=N is set,
// then a summary (mean milliseconds per step) is logged every N steps.
class StepProfile {
 public:
  enum Phase {
    kSchedule,        // Scheduler::Schedule and BuildStepInput
    kSamplingInputs,  // per-sequence device-sampling inputs
    kRunnerHost,      // the runner's Step, less its wait for the device
    kDeviceWait,      // the runner blocked on the device
    kOutputs,         // OnStepComputed, tokens accepted, responses
    kStats,           // the iteration record
    kNumPhases
  };

  StepProfile();
  bool enabled() const { return every_ > 0; }
  // Starts timing the next phase; the time since the previous mark goes to `finished`.
  void Mark(Phase finished);
  void Begin() { last_ = Clock::now(); }
  // The runner's own measures (model::StepOutput): its wait for the device, moved from
  // kRunnerHost to kDeviceWait, and the device's busy time, which the summary sets against the
  // step's wall time (the rest is device idle time that host work causes).
  void AddRunnerTimes(double wait_ms, double device_ms);
  // num_context_tokens: the prompt (chunk) and recompute tokens among the step's sequences (the
  // rest are one-token decodes), so that a summary says what its mean step was made of.
  void EndStep(std::int64_t num_sequences, std::int64_t num_context_tokens);

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t every_ = 0;
  std::int64_t steps_ = 0;
  std::int64_t sequences_ = 0;
  std::int64_t context_tokens_ = 0;
  Clock::time_point last_;
  std::array<double, kNumPhases> ms_{};
  double device_ms_ = 0;
};

}  // namespace inflight::executor
