// A session's share of its sandbox's upload budgets: the bytes it sent are
// charged to the destination's budget, and the connection ends once the
// budget is spent (the proxy then ends every other one to that destination).
#include <utility>  // before Asio (awaitable.hpp needs std::exchange)

#include <string>

#include "egress_proxy/session.hpp"

namespace agentctl::egress_proxy {

void Session::end_for_budget(const std::string& host, std::uint16_t port) {
    if (!m_up_endpoint || !m_upstream.is_open() || m_up_host != host || m_up_port != port) return;
    m_ending = record::Ending::Budget;
    close();
}

void Session::charge_budget() {
    if (!m_budget || m_bytes_up == m_charged) return;
    const auto delta = m_bytes_up - m_charged;
    m_charged = m_bytes_up;
    const auto before = m_budget->used.fetch_add(delta, std::memory_order_relaxed);
    const auto limit = m_budget->limit.load(std::memory_order_relaxed);
    if (limit != 0 && before < limit && before + delta >= limit) budget_spent();
}

void Session::budget_spent() {
    m_ending = record::Ending::Budget;
    if (m_context.shared.budget_spent) m_context.shared.budget_spent(m_up_host, m_up_port);
}

}  // namespace agentctl::egress_proxy
