#include "table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace inflight::bench {

void Table::Print(std::ostream& out) const {
  std::vector<std::size_t> widths(headers_.size(), 3);
  for (std::size_t c = 0; c < headers_.size(); ++c)
    widths[c] = std::max(widths[c], headers_[c].size());
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (std::size_t c = 0; c < widths.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out << " " << std::string(widths[c] - cell.size(), ' ') << cell << " |";
    }
    out << "\n";
  };
  line(headers_);
  out << "|";
  for (std::size_t w : widths) out << std::string(w + 1, '-') << ":|";
  out << "\n";
  for (const auto& row : rows_) line(row);
}

StreamingTable::StreamingTable(const std::vector<std::string>& headers, std::ostream& out,
                               std::size_t min_width)
    : out_(out) {
  for (const std::string& h : headers) widths_.push_back(std::max(min_width, h.size()));
  Line(headers);
  out_ << "|";
  for (std::size_t w : widths_) out_ << std::string(w + 1, '-') << ":|";
  out_ << std::endl;
}

void StreamingTable::AddRow(const std::vector<std::string>& cells) {
  Line(cells);
  out_ << std::flush;
}

void StreamingTable::Line(const std::vector<std::string>& cells) {
  out_ << "|";
  for (std::size_t c = 0; c < widths_.size(); ++c) {
    const std::string cell = c < cells.size() ? cells[c] : "";
    out_ << " " << std::string(widths_[c] - std::min(widths_[c], cell.size()), ' ') << cell << " |";
  }
  out_ << "\n";
}

std::string Fmt(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, std::fabs(value));
  const std::string digits_text = buf;
  const std::size_t dot = std::min(digits_text.find('.'), digits_text.size());
  // NOTE: built forwards rather than with std::string::insert, which trips GCC 12's -Wrestrict.
  std::string text = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < dot; ++i) {
    if (i > 0 && (dot - i) % 3 == 0) text.push_back(',');
    text.push_back(digits_text[i]);
  }
  text.append(digits_text, dot, std::string::npos);
  return text;
}

double Median(std::vector<double> values) {
  return Percentile(std::move(values), 0.5);
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace inflight::bench
