// Long options parsed the way tritonserver parses its command line (glibc getopt_long): an option
// may be abbreviated to any unambiguous prefix of its name (--model-repo for --model-repository),
// its value follows "=" or comes as the next argument, and aliases (--model-store) are the same
// option. What getopt_long only reports, this says in words: an unknown option comes back with the
// options it most likely meant, an ambiguous prefix with every option it matches.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inflight::server {

enum class OptionArg {
  // Takes a value: "--name=value" or "--name value" (the next argument, whatever it looks like).
  kValue,
  // A switch: "--name" alone means true; "--name=<bool>", or "--name <bool>" when the next
  // argument is a boolean literal (true/false, on/off, yes/no, 1/0, any case).
  kBool,
};

struct LongOption {
  std::vector<std::string> names;  // the first is the canonical name, the others its aliases
  OptionArg arg = OptionArg::kValue;
  std::string value_hint;  // shown in the usage: "<integer>", "<path>", "none|explicit"
  std::string help;
  // Validates and stores one occurrence; `name` is the canonical name, for error messages.
  std::function<Status(const std::string& name, const std::string& value)> apply;
};

// The option that "--<typed>" names: an exact name or alias wins; otherwise `typed` must be a
// prefix of the names of exactly one option. Errors: unknown (naming the likeliest options) or
// ambiguous (naming every option the prefix matches).
Result<const LongOption*> MatchLongOption(const std::vector<LongOption>& options,
                                          std::string_view typed);

// Applies `args` (the command line without the program name) in order. A lone "--" ends the
// options; anything after it, and any argument that is not an option, is an error, as in
// tritonserver ("unexpected argument").
Status ParseLongOptions(const std::vector<LongOption>& options,
                        const std::vector<std::string>& args);

// "true"/"on"/"yes"/"1" and "false"/"off"/"no"/"0", any case (tritonserver takes true/on/1 and
// false/off/0); `name` names the option in the error.
Result<bool> ParseBoolOption(const std::string& name, const std::string& value);
// A base-10 integer in [min, max], nothing else in the text.
Result<long long> ParseIntOption(const std::string& name, const std::string& value, long long min,
                                 long long max);

// One block per option: its names (--a, --alias), value hint and help.
std::string LongOptionsUsage(const std::vector<LongOption>& options);

}  // namespace inflight::server
