// The proxy's side of secret rotation (secret_rotation.hpp): a Unix socket on
// loop 0, served one short connection at a time. Included only by the
// proxy's Asio translation units.
#pragma once

#include <utility>  // before Asio: awaitable.hpp needs std::exchange on g++ 12

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <string>

namespace agentctl::egress_proxy {

class AccessLog;
class TlsIntercept;

class SecretListener {
public:
    // Binds `path` (mode 0600, replacing a stale socket) and starts accepting
    // on `io`: from root, and from `peer_uid` too unless it is -1. Throws
    // agentctl::Error when it cannot.
    SecretListener(boost::asio::io_context& io, std::string path, long peer_uid, TlsIntercept& intercept,
                   AccessLog& log);
    ~SecretListener();
    SecretListener(const SecretListener&) = delete;
    SecretListener& operator=(const SecretListener&) = delete;

private:
    void accept();
    // Reads one payload from `peer`, applies it, answers; never throws.
    void serve(boost::asio::local::stream_protocol::socket& peer);

    std::string m_path;
    long m_peer_uid;
    TlsIntercept& m_intercept;
    AccessLog& m_log;
    boost::asio::local::stream_protocol::acceptor m_acceptor;
};

}  // namespace agentctl::egress_proxy
