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

// A markdown table printed as it grows: the header at construction, each row when added (then
// flushed), so a run stopped half-way keeps the rows it finished. Columns take the header's width
// (at least `min_width`); a longer cell widens its row only, which markdown renders the same.
class StreamingTable {
 public:
  StreamingTable(const std::vector<std::string>& headers, std::ostream& out,
                 std::size_t min_width = 8);
  void AddRow(const std::vector<std::string>& cells);

 private:
  void Line(const std::vector<std::string>& cells);
  std::vector<std::size_t> widths_;
  std::ostream& out_;
};

// Fixed-point with `digits` decimals; thousands separated by ',' (as perf-anchors.md writes them).
std::string Fmt(double value, int digits = 2);

// Median and nearest-rank percentile of a copy of `values` (0 for an empty list).
double Median(std::vector<double> values);
double Percentile(std::vector<double> values, double fraction);

// Seconds of a steady clock, for timing loops.
double NowSeconds();

}  // namespace inflight::bench
