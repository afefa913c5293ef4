// Command-line flags for the tools: "--name value" or "--name=value", a generated --help, and
// errors that name the flag, the value and what is accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "inflight/status.h"

namespace inflight::tools {

class FlagSet {
 public:
  using Parser = std::function<Status(const std::string& value)>;

  FlagSet(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  // A flag with a value; `parse` validates and stores it.
  void Add(std::string name, std::string value_hint, std::string help, Parser parse);
  // A flag whose value is stored as given.
  void AddString(std::string name, std::string value_hint, std::string help, std::string* out);
  // A flag that may stand alone (meaning true) or take =true/=false.
  void AddSwitch(std::string name, std::string help, bool* out);

  // Returns false when --help was given (the help is printed to stdout); errors for unknown flags,
  // missing values, bad values or missing required flags.
  Result<bool> Parse(int argc, char** argv);
  // A program's main after its flags are added: parses (a flag error is printed, exit status 2;
  // --help prints the help, 0), then runs `run`; an error it returns is printed as
  // "<program>: <status>", exit status 1.
  int ParseAndRun(int argc, char** argv, const std::function<Status()>& run);
  // Marks a flag required: Parse fails when it is absent.
  void Require(const std::string& name) { required_.push_back(name); }
  bool WasSet(const std::string& name) const;
  std::string Help() const;

 private:
  struct Flag {
    std::string name, value_hint, help;
    Parser parse;
    bool is_switch = false;
    bool set = false;
  };
  Flag* Find(const std::string& name);

  std::string program_, description_;
  std::vector<Flag> flags_;
  std::vector<std::string> required_;
};

// Parsers for Add(): each error names "--flag", the value received and the accepted range.
Status ParseInt(const std::string& flag, const std::string& text, std::int64_t lo, std::int64_t hi,
                std::int64_t* out);
Status ParseInt32(const std::string& flag, const std::string& text, std::int64_t lo,
                  std::int64_t hi, std::int32_t* out);
Status ParseDouble(const std::string& flag, const std::string& text, double lo, double hi,
                   double* out);
Status ParseChoice(const std::string& flag, const std::string& text,
                   const std::vector<std::string>& choices, std::string* out);
// The items of a comma-separated list, empty ones included: "a,,b" and "a,b," have three, "" one.
std::vector<std::string> SplitCommas(const std::string& text);
// Comma-separated lists: every item as ParseInt or ParseChoice takes it; an empty item ("1,,2")
// is refused like any other bad one. `out` is replaced.
Status ParseIntList(const std::string& flag, const std::string& text, std::int64_t lo,
                    std::int64_t hi, std::vector<std::int64_t>* out);
Status ParseChoiceSet(const std::string& flag, const std::string& text,
                      const std::vector<std::string>& choices, std::set<std::string>* out);

}  // namespace inflight::tools
