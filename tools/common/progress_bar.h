// Progress on stderr: a redrawn bar on a terminal, a plain line every 10% otherwise (logs, CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace inflight::tools {

class ProgressBar {
 public:
  explicit ProgressBar(std::string unit);  // what items are: "tensors"
  // bytes_total 0: items without sizes; `current` is shown where the bytes would be.
  void Update(std::int64_t items_done, std::int64_t items_total, std::uint64_t bytes_done,
              std::uint64_t bytes_total, std::string_view current);
  // Ends the bar's line on a terminal.
  void Finish();
  double elapsed_seconds() const;

 private:
  std::string unit_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_decile_ = -1;
  bool drawn_ = false;
};

// "1.5 GiB", "12.0 MiB", "512 B"
std::string FormatBytes(std::uint64_t bytes);

}  // namespace inflight::tools
