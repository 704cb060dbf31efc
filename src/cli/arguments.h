// Command-line parsing for the tunec subcommands: flags, repeated flags and positionals.
#pragma once

#include "frontend/onnx_importer.h"
#include "ir/shape.h"
#include "support/error.h"

#include <map>
#include <string>
#include <vector>

namespace tunec::cli {

/// A flag a command accepts.
struct FlagSpec {
  std::string name;  ///< without the leading "--"
  std::string value; ///< placeholder shown in help ("FILE"); empty for a boolean switch
  std::string help;
  bool repeated = false;
};

/// What a command accepts, for parsing and for its --help text.
struct CommandSpec {
  std::string name;
  std::string usage; ///< "tunec run MODEL.onnx [flags]"
  std::string summary;
  std::vector<FlagSpec> flags;
  int minPositionals = 0;
  int maxPositionals = 0;
};

/// Parsed arguments of one command.
class Arguments {
public:
  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  /// The last value of a flag, or `fallback`.
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  /// All values of a repeated flag, in order.
  std::vector<std::string> getAll(const std::string& flag) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  bool helpRequested() const { return help_; }

  /// Parses argv after the command name; the error names the offending argument.
  static Expected<Arguments> parse(const CommandSpec& spec, const std::vector<std::string>& args);

private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

/// The --help text of a command.
std::string helpText(const CommandSpec& spec);

/// Parses the --input-shape flags ("name=1x3x224x224") and the --dim flags ("sequence=1..512",
/// "input_ids:1=sequence", "total_sequence=past_sequence+sequence").
/// With the --buckets flags ("sequence=16,32,64"): each a symbol --dim bounds, its edges
/// ascending within the bounds.
Expected<InputDims> parseInputDims(const std::vector<std::string>& shapeFlags,
                                   const std::vector<std::string>& dimFlags,
                                   const std::vector<std::string>& bucketFlags = {});
/// The --dim flag's spec, shared by the commands that import a model.
inline constexpr const char* kDimFlagHelp =
    "bound a dynamic dimension, e.g. sequence=1..512 or past_sequence=0..2048 (a symbolic "
    "compile), name one, e.g. input_ids:1=sequence, or define one by others, e.g. "
    "total_sequence=past_sequence+sequence (found by itself where the graph adds them)";

/// The --buckets flag's help, shared by the commands that take --dim.
inline constexpr const char* kBucketsFlagHelp =
    "the size buckets of a --dim symbol's kernels, each bucket's largest size, e.g. "
    "sequence=16,32,64,128,256,512 (default: cut at 16, 24, 32, 48, 64, ...); each bucket's "
    "kernels get a variant with its own tuned config";

} // namespace tunec::cli
