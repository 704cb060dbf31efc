// Flag parsing and help text shared by every tunec subcommand.
#include "cli/arguments.h"

#include <cctype>
#include <optional>
#include <sstream>

namespace tunec::cli {

std::string Arguments::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() || it->second.empty() ? fallback : it->second.back();
}

std::vector<std::string> Arguments::getAll(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Expected<Arguments> Arguments::parse(const CommandSpec& spec,
                                     const std::vector<std::string>& args) {
  Arguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // "-h" asks for help unless the command has a flag -h and a value follows (bench-op's
    // input height: "-h 56").
    bool heightFlag = false;
    for (const auto& f : spec.flags) heightFlag |= f.name == "h";
    if (arg == "--help" || (arg == "-h" && !(heightFlag && i + 1 < args.size()))) {
      out.help_ = true;
      return out;
    }
    bool shortFlag = arg.size() == 2 && arg[0] == '-' && arg[1] != '-';
    if ((arg.rfind("--", 0) != 0 || arg == "--") && !shortFlag) {
      out.positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(shortFlag ? 1 : 2), value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    const FlagSpec* flag = nullptr;
    for (const auto& f : spec.flags)
      if (f.name == name) flag = &f;
    if (!flag)
      return makeError("tunec ", spec.name, ": unknown flag '--", name, "'; see 'tunec ", spec.name,
                       " --help'");
    if (!flag->value.empty() && !inlineValue) {
      if (i + 1 >= args.size())
        return makeError("tunec ", spec.name, ": flag '--", name, "' needs a value (", flag->value,
                         ")");
      value = args[++i];
    }
    if (!flag->repeated && out.values_.count(name))
      return makeError("tunec ", spec.name, ": flag '--", name, "' given more than once");
    out.values_[name].push_back(value);
  }
  int n = static_cast<int>(out.positionals_.size());
  if (n < spec.minPositionals || n > spec.maxPositionals)
    return makeError("tunec ", spec.name, ": expected ", spec.usage, "; see 'tunec ", spec.name,
                     " --help'");
  return out;
}

std::string helpText(const CommandSpec& spec) {
  std::ostringstream os;
  os << "usage: " << spec.usage << "\n\n" << spec.summary << "\n";
  if (!spec.flags.empty()) os << "\nflags:\n";
  for (const auto& f : spec.flags) {
    std::string dashes = f.name.size() == 1 ? "-" : "--";
    std::string left = "  " + dashes + f.name + (f.value.empty() ? "" : " " + f.value);
    if (left.size() < 30)
      left.append(30 - left.size(), ' ');
    else
      left += "  ";
    os << left << f.help << (f.repeated ? " (repeatable)" : "") << "\n";
  }
  os << "  --help                      show this help\n";
  return os.str();
}

namespace {

// A non-negative decimal integer that fits int64_t.
std::optional<int64_t> parseExtent(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoll(text);
}

bool isSymbolName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

// NAME+NAME*2+1: a sum of products of symbol names and integers.
std::optional<DimExpr> parseDimExpr(const std::string& text) {
  if (text.empty()) return std::nullopt;
  DimExpr sum(0);
  size_t start = 0;
  while (start <= text.size()) {
    size_t plus = text.find('+', start);
    std::string term =
        text.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    DimExpr product(1);
    size_t f = 0;
    while (f <= term.size()) {
      size_t star = term.find('*', f);
      std::string factor = term.substr(f, star == std::string::npos ? std::string::npos : star - f);
      if (auto n = parseExtent(factor))
        product = product * DimExpr(*n);
      else if (isSymbolName(factor) && !std::isdigit(static_cast<unsigned char>(factor[0])))
        product = product * DimExpr::symbol(factor);
      else
        return std::nullopt;
      if (star == std::string::npos) break;
      f = star + 1;
    }
    sum = sum + product;
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return sum;
}

} // namespace

Expected<InputDims> parseInputDims(const std::vector<std::string>& shapeFlags,
                                   const std::vector<std::string>& dimFlags,
                                   const std::vector<std::string>& bucketFlags) {
  InputDims dims;
  for (const auto& v : shapeFlags) {
    auto eq = v.rfind('=');
    Shape shape;
    if (eq == std::string::npos || eq == 0 || !parseShape(v.substr(eq + 1), shape))
      return makeError("--input-shape '", v, "' is not of the form name=1x3x224x224");
    dims.shapes[v.substr(0, eq)] = shape;
  }
  for (const auto& v : dimFlags) {
    auto eq = v.rfind('=');
    std::string left = eq == std::string::npos ? v : v.substr(0, eq);
    std::string right = eq == std::string::npos ? "" : v.substr(eq + 1);
    auto colon = left.rfind(':');
    if (colon != std::string::npos) {
      // INPUT:AXIS=NAME names a dimension.
      auto axis = parseExtent(left.substr(colon + 1));
      if (colon == 0 || !axis || *axis > 64 || !isSymbolName(right))
        return makeError("--dim '", v, "' is not of the form INPUT:AXIS=NAME (e.g. ",
                         "input_ids:1=sequence)");
      dims.names[{left.substr(0, colon), static_cast<int>(*axis)}] = right;
      continue;
    }
    auto dots = right.find("..");
    if (dots == std::string::npos && isSymbolName(left)) {
      // NAME=EXPR: a symbol that is an expression of others.
      auto e = parseDimExpr(right);
      if (e && !e->isConstant()) {
        for (const std::string& used : e->symbols())
          if (used == left) return makeError("--dim '", v, "' defines '", left, "' by itself");
        if (!dims.equal.emplace(left, *e).second)
          return makeError("--dim defines '", left, "' twice");
        continue;
      }
    }
    std::optional<int64_t> lo, hi;
    if (dots != std::string::npos) {
      lo = parseExtent(right.substr(0, dots));
      hi = parseExtent(right.substr(dots + 2));
    }
    if (!isSymbolName(left) || !lo || !hi)
      return makeError("--dim '", v, "' is not of the form NAME=MIN..MAX (e.g. sequence=1..512), ",
                       "INPUT:AXIS=NAME (e.g. input_ids:1=sequence) or NAME=EXPR (e.g. ",
                       "total_sequence=past_sequence+sequence)");
    const int64_t min = *lo, max = *hi;
    if (min < 0 || min > max)
      return makeError("--dim '", v, "': the bounds must satisfy 0 <= MIN <= MAX");
    if (dims.ranges.count(left)) return makeError("--dim gives the bounds of '", left, "' twice");
    dims.ranges[left] = {min, max};
  }
  for (const auto& v : bucketFlags) {
    auto eq = v.find('=');
    const std::string name = eq == std::string::npos ? v : v.substr(0, eq);
    const std::string list = eq == std::string::npos ? "" : v.substr(eq + 1);
    if (!isSymbolName(name) || list.empty())
      return makeError("--buckets '", v, "' is not of the form NAME=E1,E2,... (e.g. ",
                       "sequence=16,32,64,128)");
    auto range = dims.ranges.find(name);
    if (range == dims.ranges.end())
      return makeError("--buckets '", v, "': '", name, "' has no bounds: give them with --dim ",
                       name, "=MIN..MAX");
    if (dims.buckets.count(name)) return makeError("--buckets gives '", name, "' twice");
    std::vector<int64_t> edges;
    size_t at = 0;
    while (at <= list.size()) {
      size_t comma = list.find(',', at);
      auto edge =
          parseExtent(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (!edge || *edge < 1)
        return makeError("--buckets '", v, "': each edge must be a whole number >= 1");
      if (*edge < range->second.first || *edge > range->second.second)
        return makeError("--buckets '", v, "': ", *edge, " is outside the bounds of '", name, "' (",
                         range->second.first, "..", range->second.second, ")");
      if (!edges.empty() && *edge <= edges.back())
        return makeError("--buckets '", v, "': the edges must ascend");
      edges.push_back(*edge);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    dims.buckets[name] = std::move(edges);
  }
  return dims;
}

} // namespace tunec::cli
