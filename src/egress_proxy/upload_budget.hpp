// Upload budgets in the proxy: per destination (host:port) of this sandbox,
// the bytes its connections there have sent, against the policy's budget.
// The counters outlive the proxy in a small state file next to its log,
// written atomically once a second while they move and when the proxy stops.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentctl/policy.hpp"

namespace agentctl::egress_proxy {

// One destination's counter, shared by its connections on every event loop.
// A relay adds what it sent with one relaxed atomic add.
struct BudgetCounter {
    std::atomic<std::uint64_t> used{0};
    std::atomic<std::uint64_t> limit{0};  // 0: no budget (anymore)

    // Bytes that may still go there (the largest value without a budget).
    [[nodiscard]] std::uint64_t remaining() const {
        const auto cap = limit.load(std::memory_order_relaxed);
        const auto sent = used.load(std::memory_order_relaxed);
        if (cap == 0) return std::numeric_limits<std::uint64_t>::max();
        return sent >= cap ? 0 : cap - sent;
    }
    [[nodiscard]] bool spent() const { return remaining() == 0; }
};

// The state file of the log at `log_path` (empty: none).
[[nodiscard]] std::string budget_state_path(const std::string& log_path);

// Thread-safe.
class BudgetBook {
public:
    // Reads the counters kept at `state_path` (empty: kept nowhere). A missing
    // file starts from zero; a malformed one too, and `problem()` says why.
    explicit BudgetBook(std::string state_path);

    // The policy's budgets, on every load: limits set, removed ones lifted;
    // `default_budget` (0: none) for every destination without its own.
    void configure(const std::vector<policy::UploadBudget>& budgets, std::uint64_t default_budget);
    // The counter of host:port when it has a budget (its own or the
    // default); null otherwise.
    [[nodiscard]] std::shared_ptr<BudgetCounter> find(const std::string& host, std::uint16_t port);
    // Writes the counters (atomically) when any moved since the last save.
    void save_if_changed();
    [[nodiscard]] const std::string& problem() const { return m_problem; }

private:
    static std::string key(const std::string& host, std::uint16_t port);

    mutable std::mutex m_mutex;
    const std::string m_path;
    std::string m_problem;
    std::uint64_t m_default = 0;                                                    // 0: none
    std::map<std::string, std::shared_ptr<BudgetCounter>, std::less<>> m_counters;  // by host:port
    std::map<std::string, std::uint64_t, std::less<>> m_saved;                      // as last written
};

}  // namespace agentctl::egress_proxy
