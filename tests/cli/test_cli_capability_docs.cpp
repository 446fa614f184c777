// docs/capabilities.md must say what the binary says: the table is compared
// with `agentctl capabilities --output json` (this host is Linux, so the
// "lima elsewhere" column is the one the binary reports).
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"
#include "support/build_paths.hpp"

using agentctl::test::CliSandbox;

TEST_CASE("the capability matrix in docs/capabilities.md matches the binary") {
    CliSandbox cli;
    auto r = cli.run({"capabilities", "--output", "json"});
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);

    const std::map<std::string, std::string> abbreviations = {
        {"S", "Supported"}, {"NA", "NotAvailable"}, {"UD", "UnderDevelopment"}, {"MW", "ManualWorkaround"}};
    std::ifstream in(std::string(agentctl::test::source_dir()) + "/docs/capabilities.md");
    REQUIRE(in);
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
        if (line.rfind("| `", 0) != 0) continue;
        std::vector<std::string> cells;
        std::stringstream s(line);
        std::string cell;
        while (std::getline(s, cell, '|')) {
            auto first = cell.find_first_not_of(' ');
            auto last = cell.find_last_not_of(' ');
            if (first != std::string::npos) cells.push_back(cell.substr(first, last - first + 1));
        }
        REQUIRE(cells.size() == 5);
        const auto feature = cells[0].substr(1, cells[0].size() - 2);
        INFO(feature);
        CHECK(doc["incus"]["features"][feature]["status"] == abbreviations.at(cells[1]));
        CHECK(doc["lima"]["features"][feature]["status"] == abbreviations.at(cells[3]));
        CHECK(doc["hyperv"]["features"][feature]["status"] == abbreviations.at(cells[4]));
        ++rows;
    }
    CHECK(rows == 27);
}
