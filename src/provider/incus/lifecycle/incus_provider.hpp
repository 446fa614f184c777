// The incus provider's factory; the provider class itself stays in
// provider_impl.hpp (private to this module).
//
// The provider talks to the Incus REST API over its unix socket (client.hpp),
// gives every sandbox its own managed bridge, subnet and network ACL, and runs
// only interactive `shell` / `exec -t` / `view` through the `incus` client.
// With ProviderContext::preview it prints `incus query ...` lines instead.
//
// Its settings (`incus.*`, read from ProviderContext::settings) are declared,
// with their validators and defaults, in settings.hpp.
#pragma once

#include <memory>

#include "agentctl/provider.hpp"

namespace agentctl::provider::incus {

class Client;
class EgressHost;
struct Server;

[[nodiscard]] CapabilityMatrix capabilities(const HostPlatform& platform);
[[nodiscard]] std::unique_ptr<Provider> create(ProviderContext& context);

// For tests: a provider over a given client and egress host (where the
// sandboxes' proxies and firewall tables live), for `server` (server.hpp).
[[nodiscard]] std::unique_ptr<Provider> make_provider(ProviderContext& context, std::unique_ptr<Client> client,
                                                      std::unique_ptr<EgressHost> egress, Server server);
[[nodiscard]] std::unique_ptr<Provider> make_provider(ProviderContext& context, std::unique_ptr<Client> client,
                                                      std::unique_ptr<EgressHost> egress);

}  // namespace agentctl::provider::incus
