// A value every event loop of the proxy reads and one place replaces while it
// runs: the policy and the resolve map (reloads), the secrets (rotation).
#pragma once

#include <memory>
#include <mutex>

namespace agentctl::egress_proxy {

// A value every loop reads and loop 0 replaces (the policy on a reload, the
// resolve map on SIGHUP, the secrets on a rotation). A reader gets the snapshot in force and keeps it
// alive for as long as it holds it.
template <class T>
class SharedSnapshot {
public:
    [[nodiscard]] std::shared_ptr<const T> get() const {
        std::lock_guard lock(m_mutex);
        return m_value;
    }
    // The replaced snapshot is released by its last holder, outside the lock.
    void set(std::shared_ptr<const T> value) {
        std::lock_guard lock(m_mutex);
        m_value.swap(value);
    }

private:
    mutable std::mutex m_mutex;
    std::shared_ptr<const T> m_value;
};

}  // namespace agentctl::egress_proxy
