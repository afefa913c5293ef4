#include "server/long_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>

namespace inflight::server {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Levenshtein distance, for "did you mean" (option names are short: O(n*m) is nothing).
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string JoinOptionNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "--" : ", --") + n;
  return out;
}

// The names an unknown option most likely meant: the same text with '_' for '-' (the spelling of
// launch_triton_server.py's own flags) as a prefix, else names within a small edit distance.
std::vector<std::string> Suggestions(const std::vector<LongOption>& options,
                                     std::string_view typed) {
  std::string dashed(typed);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::vector<std::string> found;
  for (const LongOption& o : options) {
    for (const std::string& n : o.names) {
      if (dashed != typed && StartsWith(n, dashed)) found.push_back(n);
    }
  }
  if (!found.empty()) return found;
  const std::size_t limit = std::max<std::size_t>(2, typed.size() / 4);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const LongOption& o : options) {
    for (const std::string& n : o.names) {
      // Compare with the name cut to the typed length as well, so a misspelt prefix is found.
      const std::size_t d = std::min(
          EditDistance(typed, n), EditDistance(typed, std::string_view(n).substr(0, typed.size())));
      if (d <= limit) near.emplace_back(d, n);
    }
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < near.size() && i < 5; ++i) found.push_back(near[i].second);
  return found;
}

}  // namespace

Result<const LongOption*> MatchLongOption(const std::vector<LongOption>& options,
                                          std::string_view typed) {
  if (!typed.empty()) {
    for (const LongOption& o : options) {
      if (std::find(o.names.begin(), o.names.end(), typed) != o.names.end()) return &o;
    }
  }
  const LongOption* match = nullptr;
  bool ambiguous = false;
  std::vector<std::string> matched_names;
  for (const LongOption& o : options) {
    bool this_option = false;
    for (const std::string& n : o.names) {
      if (!typed.empty() && StartsWith(n, typed)) {
        matched_names.push_back(n);
        this_option = true;
      }
    }
    if (!this_option) continue;
    // Aliases of one option are one match (getopt_long: same option, not ambiguous).
    if (match != nullptr && match != &o) ambiguous = true;
    match = &o;
  }
  if (ambiguous) {
    return InvalidArgument("option --" + std::string(typed) +
                           " is ambiguous; possibilities: " + JoinOptionNames(matched_names));
  }
  if (match != nullptr) return match;
  std::string message = "unknown option --" + std::string(typed);
  const std::vector<std::string> near = Suggestions(options, typed);
  if (!near.empty()) message += "; did you mean " + JoinOptionNames(near) + "?";
  return InvalidArgument(message + " (see --help for the accepted options)");
}

Result<bool> ParseBoolOption(const std::string& name, const std::string& value) {
  const std::string v = Lower(value);
  if (v == "true" || v == "on" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "off" || v == "no" || v == "0") return false;
  return InvalidArgument("--" + name + "=" + value +
                         " is not a boolean (true/false, on/off, yes/no, 1/0)");
}

Result<long long> ParseIntOption(const std::string& name, const std::string& value, long long min,
                                 long long max) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < min ||
      v > max) {
    return InvalidArgument("--" + name + "=" + value + " is not an integer in " +
                           std::to_string(min) + ".." + std::to_string(max));
  }
  return v;
}

Status ParseLongOptions(const std::vector<LongOption>& options,
                        const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (i + 1 < args.size()) {
        return InvalidArgument("unexpected argument \"" + args[i + 1] +
                               "\" after \"--\"; see --help");
      }
      break;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return InvalidArgument("unexpected argument \"" + arg +
                             "\": options are --name=value or --name value; see --help");
    }
    std::string typed = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = typed.find('='); eq != std::string::npos) {
      value = typed.substr(eq + 1);
      typed.resize(eq);
    }
    ASSIGN_OR_RETURN(const LongOption* option, MatchLongOption(options, typed));
    const std::string& name = option->names.front();
    if (!value) {
      const bool has_next = i + 1 < args.size();
      if (option->arg == OptionArg::kBool) {
        value = "true";
        if (has_next && ParseBoolOption(name, args[i + 1]).ok()) value = args[++i];
      } else {
        if (!has_next) return InvalidArgument("option --" + name + " needs a value");
        value = args[++i];
      }
    }
    RETURN_IF_ERROR(option->apply(name, *value));
  }
  return Status::Ok();
}

std::string LongOptionsUsage(const std::vector<LongOption>& options) {
  std::ostringstream out;
  for (const LongOption& o : options) {
    const std::string hint = o.arg == OptionArg::kBool ? "[=<boolean>]" : "=" + o.value_hint;
    out << "  " << JoinOptionNames(o.names) << hint << "\n      " << o.help << "\n";
  }
  return out.str();
}

}  // namespace inflight::server
