#include "common/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace inflight::tools {

std::string FormatBytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

ProgressBar::ProgressBar(std::string unit)
    : unit_(std::move(unit)),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::Update(std::int64_t items_done, std::int64_t items_total,
                         std::uint64_t bytes_done, std::uint64_t bytes_total,
                         std::string_view current) {
  const double frac = bytes_total
                          ? static_cast<double>(bytes_done) / static_cast<double>(bytes_total)
                          : (items_total ? static_cast<double>(items_done) / items_total : 1.0);
  const double secs = elapsed_seconds();
  const double rate = secs > 0 ? static_cast<double>(bytes_done) / secs : 0.0;
  const bool last = items_done >= items_total;
  // Without bytes (bytes_total 0) the amounts are left out and `current` says how far it is.
  const std::string amounts =
      bytes_total ? FormatBytes(bytes_done) + " / " + FormatBytes(bytes_total) : std::string();
  char line[512];
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<std::size_t>(fill), '=');
    if (fill < kWidth) bar += '>' + std::string(static_cast<std::size_t>(kWidth - fill - 1), ' ');
    const std::string rate_text =
        bytes_total ? FormatBytes(static_cast<std::uint64_t>(rate)) + "/s  " : std::string();
    std::snprintf(line, sizeof(line), "\r[%s] %3.0f%% %lld/%lld %s  %s  %s%.*s\033[K", bar.c_str(),
                  frac * 100.0, static_cast<long long>(items_done),
                  static_cast<long long>(items_total), unit_.c_str(), amounts.c_str(),
                  rate_text.c_str(), static_cast<int>(std::min<std::size_t>(current.size(), 60)),
                  current.data());
    std::fputs(line, stderr);
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(frac * 10.0);
  if (decile == last_decile_ && !last) return;
  last_decile_ = decile;
  std::snprintf(line, sizeof(line), "%3.0f%%  %lld/%lld %s  %s  %.1f s\n", frac * 100.0,
                static_cast<long long>(items_done), static_cast<long long>(items_total),
                unit_.c_str(), bytes_total ? amounts.c_str() : std::string(current).c_str(), secs);
  std::fputs(line, stderr);
}

void ProgressBar::Finish() {
  if (tty_ && drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace inflight::tools
