#include "egress_proxy/upload_budget.hpp"

#include <nlohmann/json.hpp>

#include "core/files.hpp"

namespace agentctl::egress_proxy {
namespace {

constexpr int k_state_version = 1;

}  // namespace

std::string budget_state_path(const std::string& log_path) {
    return log_path.empty() ? std::string() : log_path + ".budgets";
}

BudgetBook::BudgetBook(std::string state_path) : m_path(std::move(state_path)) {
    if (m_path.empty()) return;
    std::optional<std::string> text;
    try {
        text = core::read_file_if_exists(m_path);
    } catch (const std::exception& e) {
        m_problem = e.what();
        return;
    }
    if (!text) return;
    // {"version":1,"sent":{"host:port":bytes,...}}
    const auto state = nlohmann::json::parse(*text, nullptr, false);
    const auto sent = state.is_object() ? state.find("sent") : state.end();
    if (!state.is_object() || state.value("version", 0) != k_state_version || sent == state.end() ||
        !sent->is_object()) {
        m_problem = m_path + ": not an upload budget state file (version " + std::to_string(k_state_version) +
                    "); the counters start from zero";
        return;
    }
    for (const auto& [destination, bytes] : sent->items()) {
        if (!bytes.is_number_unsigned()) continue;
        auto counter = std::make_shared<BudgetCounter>();
        counter->used = bytes.get<std::uint64_t>();
        m_saved[destination] = bytes.get<std::uint64_t>();
        m_counters.emplace(destination, std::move(counter));
    }
}

std::string BudgetBook::key(const std::string& host, std::uint16_t port) {
    return policy::destination_text(host, port);
}

void BudgetBook::configure(const std::vector<policy::UploadBudget>& budgets, std::uint64_t default_budget) {
    std::lock_guard lock(m_mutex);
    m_default = default_budget;
    for (auto& [destination, counter] : m_counters) counter->limit = m_default;
    for (const auto& budget : budgets) {
        auto& counter = m_counters[key(budget.host, budget.port)];
        if (!counter) counter = std::make_shared<BudgetCounter>();
        counter->limit = budget.bytes;
    }
}

std::shared_ptr<BudgetCounter> BudgetBook::find(const std::string& host, std::uint16_t port) {
    std::lock_guard lock(m_mutex);
    if (m_counters.empty() && m_default == 0) return nullptr;
    const auto destination = key(host, port);
    auto it = m_counters.find(destination);
    if (it == m_counters.end()) {
        if (m_default == 0) return nullptr;
        // The first connection to a destination under the default budget.
        auto counter = std::make_shared<BudgetCounter>();
        counter->limit = m_default;
        it = m_counters.emplace(destination, std::move(counter)).first;
    }
    if (it->second->limit.load(std::memory_order_relaxed) == 0) return nullptr;
    return it->second;
}

void BudgetBook::save_if_changed() {
    std::lock_guard lock(m_mutex);
    if (m_path.empty()) return;
    std::map<std::string, std::uint64_t, std::less<>> now;
    for (const auto& [destination, counter] : m_counters) {
        const auto used = counter->used.load(std::memory_order_relaxed);
        if (used > 0) now[destination] = used;
    }
    if (now == m_saved) return;
    nlohmann::json sent = nlohmann::json::object();
    for (const auto& [destination, used] : now) sent[destination] = used;
    try {
        core::write_file_atomic(m_path, nlohmann::json{{"version", k_state_version}, {"sent", sent}}.dump() + "\n",
                                0600);
        m_saved = std::move(now);
    } catch (const std::exception&) {
        // Kept in memory; the next tick tries again.
    }
}

}  // namespace agentctl::egress_proxy
