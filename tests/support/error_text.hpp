// What an action's agentctl::Error says, for tests that compare error text
// exactly: one catch for every suite.
#pragma once

#include <string>
#include <utility>

#include "agentctl/error.hpp"

namespace agentctl::test {

// What `action()` returns when it throws no agentctl::Error.
inline constexpr const char* k_no_error = "<no error>";

// The message of the agentctl::Error `action()` throws, or k_no_error.
template <typename Action>
std::string error_of(Action&& action) {
    try {
        std::forward<Action>(action)();
    } catch (const Error& error) {
        return error.what();
    }
    return k_no_error;
}

// The same, followed by "\nhint: " and the error's hint.
template <typename Action>
std::string error_and_hint_of(Action&& action) {
    try {
        std::forward<Action>(action)();
    } catch (const Error& error) {
        return std::string(error.what()) + "\nhint: " + error.hint();
    }
    return k_no_error;
}

// The hint of the agentctl::Error `action()` throws, or k_no_error.
template <typename Action>
std::string hint_of(Action&& action) {
    try {
        std::forward<Action>(action)();
    } catch (const Error& error) {
        return error.hint();
    }
    return k_no_error;
}

}  // namespace agentctl::test
