// A Resolver for tests (agentctl/host_network.hpp): answers from a table of
// names and records every name it was asked for, so code that looks names up
// runs without DNS.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agentctl/host_network.hpp"

namespace agentctl::test {

class FakeResolver final : public policy::Resolver {
public:
    // name -> address literals, in the order resolve() returns them.
    std::map<std::string, std::vector<std::string>> table;
    std::vector<std::string> asked;

    std::vector<policy::IpAddress> resolve(const std::string& host) override {
        asked.push_back(host);
        std::vector<policy::IpAddress> out;
        if (auto it = table.find(host); it != table.end()) {
            for (const auto& text : it->second) out.push_back(*policy::parse_ip_literal(text));
        }
        return out;
    }
};

}  // namespace agentctl::test
