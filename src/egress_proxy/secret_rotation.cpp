#include "egress_proxy/secret_rotation.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agentctl/error.hpp"
#include "egress_proxy/access_log.hpp"
#include "egress_proxy/secret_listener.hpp"
#include "egress_proxy/tls_intercept.hpp"

namespace agentctl::egress_proxy {
namespace {

namespace local = boost::asio::local;

constexpr std::size_t k_max_payload_bytes = 1024 * 1024;
constexpr int k_timeout_seconds = 5;

// The connecting process's uid as the kernel saw it, or -1 when it does not say.
long peer_uid(int fd) {
#if defined(__linux__)
    ucred credentials{};
    socklen_t size = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
    return static_cast<long>(credentials.uid);
#else
    uid_t uid = 0;
    gid_t gid = 0;
    if (::getpeereid(fd, &uid, &gid) != 0) return -1;
    return static_cast<long>(uid);
#endif
}

void set_timeouts(int fd) {
    timeval limit{k_timeout_seconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

// Reads to the end (at most `limit` bytes); false on an error or a timeout.
bool read_all(int fd, std::string& text, std::size_t limit) {
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n == 0) return true;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || text.size() + static_cast<std::size_t>(n) > limit) return false;
        text.append(buffer, static_cast<std::size_t>(n));
    }
}

bool write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace

std::string send_secret_rotation(const std::string& socket_path, const std::string& payload) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof address.sun_path)
        throw Error(fmt::format("{}: the path is too long for a Unix socket", socket_path), "");
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(fmt::format("cannot make a Unix socket: {}", std::strerror(errno)), "");
    set_timeouts(fd);
    std::string answer;
    const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
                    write_all(fd, payload) && ::shutdown(fd, SHUT_WR) == 0 && read_all(fd, answer, 4096);
    const int error = errno;
    ::close(fd);
    if (!ok || answer.empty()) {
        throw Error(fmt::format("cannot hand the new value to the egress proxy at {}: {}", socket_path,
                                ok ? "no answer" : std::strerror(error)),
                    "restart the sandbox (agentctl stop NAME && agentctl start NAME): its proxy reads every value "
                    "at start");
    }
    while (!answer.empty() && answer.back() == '\n') answer.pop_back();
    return answer;
}

SecretListener::SecretListener(boost::asio::io_context& io, std::string path, long peer_uid, TlsIntercept& intercept,
                               AccessLog& log)
    : m_path(std::move(path)), m_peer_uid(peer_uid), m_intercept(intercept), m_log(log), m_acceptor(io) {
    ::unlink(m_path.c_str());  // a socket an earlier proxy left
    boost::system::error_code ec;
    m_acceptor.open(local::stream_protocol(), ec);
    const mode_t before = ::umask(077);  // 0600 from the start: no moment another user may connect
    if (!ec) m_acceptor.bind(local::stream_protocol::endpoint(m_path), ec);
    ::umask(before);
    if (!ec) m_acceptor.listen(4, ec);
    if (ec) {
        throw Error(fmt::format("cannot listen on {} for secret rotation: {}", m_path, ec.message()),
                    "the directory must be the proxy's own and writable");
    }
    accept();
}

SecretListener::~SecretListener() {
    boost::system::error_code ignored;
    m_acceptor.close(ignored);
    ::unlink(m_path.c_str());
}

void SecretListener::accept() {
    m_acceptor.async_accept([this](const boost::system::error_code& ec, local::stream_protocol::socket peer) {
        if (ec == boost::asio::error::operation_aborted) return;
        if (!ec) serve(peer);
        accept();
    });
}

void SecretListener::serve(local::stream_protocol::socket& peer) {
    const int fd = peer.native_handle();
    const long uid = peer_uid(fd);
    if (uid != 0 && (m_peer_uid < 0 || uid != m_peer_uid)) {
        m_log.write(LogLine("secrets")
                        .add("decision", "refused")
                        .add("reason", m_peer_uid < 0 ? "not root" : "neither root nor the owner")
                        .add("uid", uid));
        return;  // closed unanswered
    }
    set_timeouts(fd);
    std::string text;
    std::string answer;
    if (!read_all(fd, text, k_max_payload_bytes)) {
        answer = "refused: the payload was not read whole";
    } else {
        try {
            auto payload = parse_secret_payload(text);
            const auto changed = m_intercept.rotate(payload.secrets);
            for (auto& secret : payload.secrets) ::explicit_bzero(secret.value.data(), secret.value.size());
            answer = fmt::format("rotated {}", fmt::join(changed, ","));
            m_log.write(LogLine("secrets")
                            .add("decision", "rotated")
                            .add("secrets", fmt::format("{}", fmt::join(changed, ","))));
        } catch (const Error& error) {
            answer = fmt::format("refused: {}", error.what());
        }
    }
    ::explicit_bzero(text.data(), text.size());
    (void)write_all(fd, answer + "\n");
}

}  // namespace agentctl::egress_proxy
