// The verbs that take several sandbox names (create, start, stop, delete).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/session.hpp"

namespace agentctl::cli {

// Each name once, in the order first given: `stop a a` stops a once.
[[nodiscard]] std::vector<std::string> unique_names(const std::vector<std::string>& names);

// Runs `act` for each name in turn, as `docker rm a b` does: every name is
// checked first; each success is reported (`agentctl: stopped NAME`); a
// failure is reported (`agentctl: NAME: ...`) and the next name is still
// tried; the exit status is the first failure's, 0 when every name worked. A
// single name fails as any command does (its error propagates).
int for_each_name(Session& session, const std::vector<std::string>& given, std::string_view done,
                  const std::function<void(const std::string&)>& act);

}  // namespace agentctl::cli
