#include "provider/incus/network/nft_library.hpp"

#include <dlfcn.h>

#include <mutex>

namespace agentctl::provider::incus {
namespace {

// The functions of libnftables' public header (nftables/libnftables.h) this
// file calls, with its prototypes: the library's ABI is its soname's.
struct NftContext;
struct Libnftables {
    NftContext* (*ctx_new)(unsigned int flags) = nullptr;
    void (*ctx_free)(NftContext* ctx) = nullptr;
    int (*ctx_buffer_output)(NftContext* ctx) = nullptr;
    int (*ctx_buffer_error)(NftContext* ctx) = nullptr;
    const char* (*ctx_get_output_buffer)(NftContext* ctx) = nullptr;
    int (*run_cmd_from_buffer)(NftContext* ctx, const char* buf) = nullptr;
    [[nodiscard]] bool loaded() const {
        return ctx_new && ctx_free && ctx_buffer_output && ctx_buffer_error && ctx_get_output_buffer &&
               run_cmd_from_buffer;
    }
};

template <typename Function>
void resolve(void* handle, const char* name, Function& function) {
    function = reinterpret_cast<Function>(::dlsym(handle, name));
}

Libnftables load() {
    Libnftables nft;
    void* handle = ::dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return nft;
    resolve(handle, "nft_ctx_new", nft.ctx_new);
    resolve(handle, "nft_ctx_free", nft.ctx_free);
    resolve(handle, "nft_ctx_buffer_output", nft.ctx_buffer_output);
    resolve(handle, "nft_ctx_buffer_error", nft.ctx_buffer_error);
    resolve(handle, "nft_ctx_get_output_buffer", nft.ctx_get_output_buffer);
    resolve(handle, "nft_run_cmd_from_buffer", nft.run_cmd_from_buffer);
    return nft;  // the handle stays open for the life of the process
}

const Libnftables& libnftables() {
    static const Libnftables nft = load();
    return nft;
}

}  // namespace

std::optional<std::string> nft_output_in_process(const std::string& command) {
    const auto& nft = libnftables();
    if (!nft.loaded()) return std::nullopt;
    static std::mutex one_at_a_time;
    const std::lock_guard lock(one_at_a_time);
    NftContext* ctx = nft.ctx_new(0);  // NFT_CTX_DEFAULT, as the nft command's
    if (ctx == nullptr) return std::nullopt;
    std::optional<std::string> out;
    // Buffered, so that nothing is written to this process's stdout or stderr.
    if (nft.ctx_buffer_output(ctx) == 0 && nft.ctx_buffer_error(ctx) == 0) {
        out.emplace();
        if (nft.run_cmd_from_buffer(ctx, command.c_str()) == 0) {
            if (const char* text = nft.ctx_get_output_buffer(ctx)) *out = text;
        }
    }
    nft.ctx_free(ctx);
    return out;
}

}  // namespace agentctl::provider::incus
