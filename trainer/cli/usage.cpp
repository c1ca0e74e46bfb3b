// The command line's flag values.
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

std::optional<std::string> flag_value(const std::vector<std::string>& args, std::size_t& i,
                                      const std::string& flag) {
  if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  if (args[i] != flag) return std::nullopt;
  if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
  return args[++i];
}

}  // namespace ringlet::trainer::cli
