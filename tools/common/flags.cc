#include "common/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace inflight::tools {

void FlagSet::Add(std::string name, std::string value_hint, std::string help, Parser parse) {
  flags_.push_back({std::move(name), std::move(value_hint), std::move(help), std::move(parse)});
}

void FlagSet::AddString(std::string name, std::string value_hint, std::string help,
                        std::string* out) {
  Add(std::move(name), std::move(value_hint), std::move(help), [out](const std::string& v) {
    *out = v;
    return Status::Ok();
  });
}

int FlagSet::ParseAndRun(int argc, char** argv, const std::function<Status()>& run) {
  const Result<bool> parsed = Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  const Status status = run();
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

void FlagSet::AddSwitch(std::string name, std::string help, bool* out) {
  const std::string flag = "--" + name;
  Flag f{std::move(name), "", std::move(help), [flag, out](const std::string& v) -> Status {
           if (v.empty() || v == "true" || v == "1") {
             *out = true;
           } else if (v == "false" || v == "0") {
             *out = false;
           } else {
             return InvalidArgument(flag + " \"" + v + "\" is not one of: true, false");
           }
           return Status::Ok();
         }};
  f.is_switch = true;
  flags_.push_back(std::move(f));
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagSet::WasSet(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.set;
  }
  return false;
}

Result<bool> FlagSet::Parse(int argc, char** argv) {
  // A name added twice would leave the second flag unreachable (Find takes the first), and its
  // value silently ignored: a program error, refused before any flag is read.
  std::set<std::string> names;
  for (const Flag& f : flags_) {
    if (!names.insert(f.name).second) {
      return Internal("flag --" + f.name + " is defined twice in " + program_);
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(Help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      return InvalidArgument("unexpected argument \"" + arg +
                             "\": flags start with --; see --help");
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    Flag* f = Find(name);
    if (f == nullptr) return InvalidArgument("unknown flag \"--" + name + "\"; see --help");
    if (!has_value && !f->is_switch) {
      if (i + 1 >= argc) {
        return InvalidArgument("flag --" + name + " needs a value (" + f->value_hint + ")");
      }
      value = argv[++i];
    }
    RETURN_IF_ERROR(f->parse(value));
    f->set = true;
  }
  for (const std::string& r : required_) {
    if (!WasSet(r)) return InvalidArgument("flag --" + r + " is required; see --help");
  }
  return true;
}

std::string FlagSet::Help() const {
  std::ostringstream out;
  out << "Usage: " << program_ << " [flags]\n\n" << description_ << "\n\nFlags:\n";
  for (const Flag& f : flags_) {
    std::string head = "  --" + f.name + (f.value_hint.empty() ? "" : " " + f.value_hint);
    out << head;
    if (head.size() < 34) {
      out << std::string(34 - head.size(), ' ');
    } else {
      out << "\n" << std::string(34, ' ');
    }
    out << f.help << "\n";
  }
  out << "  --help                          print this help\n";
  return out.str();
}

Status ParseInt(const std::string& flag, const std::string& text, std::int64_t lo, std::int64_t hi,
                std::int64_t* out) {
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    return InvalidArgument(flag + " \"" + text + "\" is not an integer (accepted: " +
                           std::to_string(lo) + " to " + std::to_string(hi) + ")");
  }
  if (v < lo || v > hi) {
    return InvalidArgument(flag + " " + text + " is outside the accepted range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::Ok();
}

Status ParseInt32(const std::string& flag, const std::string& text, std::int64_t lo,
                  std::int64_t hi, std::int32_t* out) {
  std::int64_t v = 0;
  RETURN_IF_ERROR(ParseInt(flag, text, lo, hi, &v));
  *out = static_cast<std::int32_t>(v);
  return Status::Ok();
}

Status ParseDouble(const std::string& flag, const std::string& text, double lo, double hi,
                   double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) {
    return InvalidArgument(flag + " \"" + text + "\" is not a number");
  }
  if (v < lo || v > hi) {
    std::ostringstream range;
    range << "[" << lo << ", " << hi << "]";
    return InvalidArgument(flag + " " + text + " is outside the accepted range " + range.str());
  }
  *out = v;
  return Status::Ok();
}

Status ParseChoice(const std::string& flag, const std::string& text,
                   const std::vector<std::string>& choices, std::string* out) {
  std::string list;
  for (const std::string& c : choices) {
    if (c == text) {
      *out = text;
      return Status::Ok();
    }
    list += (list.empty() ? "" : ", ") + c;
  }
  return InvalidArgument(flag + " \"" + text + "\" is not one of: " + list);
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

Status ParseIntList(const std::string& flag, const std::string& text, std::int64_t lo,
                    std::int64_t hi, std::vector<std::int64_t>* out) {
  std::vector<std::int64_t> values;
  for (const std::string& item : SplitCommas(text)) {
    std::int64_t v = 0;
    RETURN_IF_ERROR(ParseInt(flag, item, lo, hi, &v));
    values.push_back(v);
  }
  *out = std::move(values);
  return Status::Ok();
}

Status ParseChoiceSet(const std::string& flag, const std::string& text,
                      const std::vector<std::string>& choices, std::set<std::string>* out) {
  std::set<std::string> names;
  for (const std::string& item : SplitCommas(text)) {
    std::string name;
    RETURN_IF_ERROR(ParseChoice(flag, item, choices, &name));
    names.insert(std::move(name));
  }
  *out = std::move(names);
  return Status::Ok();
}

}  // namespace inflight::tools
