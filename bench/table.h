// Plain timing helpers for the benchmarks: a markdown table printer and order statistics.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace inflight::bench {

// A markdown table (pastes straight into bench/results/*.md); columns are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Fixed-point with `digits` decimals; thousands separated by ',' (as perf-anchors.md writes them).
std::string Fmt(double value, int digits = 2);

// Median and nearest-rank percentile of a copy of `values` (0 for an empty list).
double Median(std::vector<double> values);
double Percentile(std::vector<double> values, double fraction);

// Seconds of a steady clock, for timing loops.
double NowSeconds();

}  // namespace inflight::bench
