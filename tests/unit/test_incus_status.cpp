// status on a server elsewhere (where the kernel's rules cannot be read) asks
// for the sandbox's bridge while the instance's own GET is under way, and
// leaves nothing running when that GET fails. Driven through a Client whose
// instance GET answers only once the bridge's GET has arrived (or a deadline
// passed): no sleeps, no timing.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "provider/incus/client/client.hpp"
#include "provider/incus/client/server.hpp"
#include "provider/incus/network/egress_host.hpp"
#include "provider/incus/lifecycle/incus_provider.hpp"
#include "provider/incus/lifecycle/naming.hpp"
#include "support/provider_context.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

class WaitingClient final : public Client {
public:
    explicit WaitingClient(std::string bridge) : m_bridge("/1.0/networks/" + std::move(bridge)) {}

    Response query(std::string_view, std::string_view path, const Json*) override {
        const std::string bare(path.substr(0, path.find('?')));
        std::unique_lock lock(m_mutex);
        if (bare == m_bridge) {
            m_bridge_asked = true;
            m_changed.notify_all();
            // Answers after the instance's GET did: status, which fails on
            // that answer, must still wait for this one.
            m_changed.wait_for(lock, std::chrono::seconds(20), [&] { return m_instance_answered; });
            bridge_answered = true;
        } else if (bare == "/1.0/instances") {
            // No instance records a sandbox's name (none came from the warm pool).
            Response none;
            none.status_code = 200;
            none.metadata = Json::array();
            return none;
        } else if (bare.starts_with("/1.0/instances/")) {
            // Long enough for any machine to start a thread; the test fails
            // when it runs out, which a status asking one thing at a time always lets happen.
            bridge_during_instance = m_changed.wait_for(lock, std::chrono::seconds(20), [&] { return m_bridge_asked; });
            m_instance_answered = true;
            m_changed.notify_all();
        }
        throw NotFound("not found: " + bare);
    }
    Json wait(std::string_view, int) override { return Json{{"status", "Success"}}; }
    std::string get_raw(std::string_view) override { return {}; }
    [[nodiscard]] bool preview() const override { return false; }

    bool bridge_during_instance = false;
    bool bridge_answered = false;

private:
    std::string m_bridge;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    bool m_bridge_asked = false;
    bool m_instance_answered = false;
};

}  // namespace

TEST_CASE("status on a server elsewhere asks for the sandbox's bridge while the instance's GET is under way",
          "[status]") {
    test::ProviderContextFixture<> f;
    auto client = std::make_unique<WaitingClient>(bridge_name("st-early"));
    auto* waiting = client.get();
    Server elsewhere;
    elsewhere.remote = "build";
    elsewhere.this_machine = false;
    auto provider = make_provider(f.context, std::move(client), nullptr, elsewhere);
    CHECK_THROWS_WITH(provider->lifecycle().status("st-early"), Catch::Contains("no sandbox named \"st-early\""));
    CHECK(waiting->bridge_during_instance);
    // The failed status returned only once the bridge's GET had its answer: nothing is left running.
    CHECK(waiting->bridge_answered);
}
