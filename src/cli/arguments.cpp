// Flag parsing and help text shared by every tunec subcommand.
#include "cli/arguments.h"

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

Expected<std::map<std::string, Shape>> parseInputShapes(const std::vector<std::string>& values) {
  std::map<std::string, Shape> shapes;
  for (const auto& v : values) {
    auto eq = v.rfind('=');
    Shape shape;
    if (eq == std::string::npos || eq == 0 || !parseShape(v.substr(eq + 1), shape))
      return makeError("--input-shape '", v, "' is not of the form name=1x3x224x224");
    shapes[v.substr(0, eq)] = shape;
  }
  return shapes;
}

} // namespace tunec::cli
