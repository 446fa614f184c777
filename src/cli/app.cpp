#include "cli/app.hpp"

#include <iostream>

namespace agentctl::cli {

int run(int, char**) {
    std::cout << "agentctl " << AGENTCTL_VERSION << "\n";
    return 0;
}

}  // namespace agentctl::cli
