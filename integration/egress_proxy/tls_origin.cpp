// A test HTTPS origin: `tls_origin ADDRESS:PORT CERT KEY [LOG]`. Serves
// HTTP/1.1 with keep-alive over TLS; each response's body is the request head
// exactly as it arrived (so a test sees what the origin received), followed by
// `body-bytes: N` and the request body as it arrived. With LOG, each head is appended to that
// file instead and the body is `ok` (what arrived never goes back to the client). A WebSocket upgrade is answered 101
// and every byte after it echoed. Prints `listening` once it accepts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

namespace {

bool read_more(SSL* ssl, std::string& buffer) {
    char chunk[16384];
    const int n = SSL_read(ssl, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<std::size_t>(n));
    return true;
}

bool write_all(SSL* ssl, const std::string& bytes) {
    return bytes.empty() || SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size())) > 0;
}

std::string lower(std::string text) {
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

std::size_t content_length(const std::string& head) {
    const auto lowered = lower(head);
    const auto at = lowered.find("\r\ncontent-length:");
    return at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 17, nullptr, 10);
}

const char* g_log = nullptr;
std::mutex g_log_mutex;

void serve(SSL_CTX* context, int fd) {
    SSL* ssl = SSL_new(context);
    SSL_set_fd(ssl, fd);
    std::string buffer;
    if (SSL_accept(ssl) == 1) {
        for (;;) {
            std::size_t end;
            while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
                if (!read_more(ssl, buffer)) goto done;
            }
            const std::string head = buffer.substr(0, end + 4);
            buffer.erase(0, end + 4);
            if (lower(head).find("\r\nupgrade: websocket") != std::string::npos) {
                if (!write_all(ssl,
                               "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
                    break;
                while (true) {
                    if (!write_all(ssl, buffer)) goto done;
                    buffer.clear();
                    if (!read_more(ssl, buffer)) goto done;
                }
            }
            const std::size_t length = content_length(head);
            while (buffer.size() < length) {
                if (!read_more(ssl, buffer)) goto done;
            }
            std::string body = head + "body-bytes: " + std::to_string(length) + "\n";
            if (g_log == nullptr) body += buffer.substr(0, length);
            buffer.erase(0, length);
            if (g_log != nullptr) {
                std::lock_guard lock(g_log_mutex);
                std::ofstream(g_log, std::ios::app) << body << std::flush;
                body = "ok\n";
            }
            if (!write_all(ssl, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body))
                break;
        }
    }
done:
    SSL_shutdown(ssl);
    SSL_free(ssl);
    ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: tls_origin ADDRESS:PORT CERT KEY [LOG]\n");
        return 2;
    }
    if (argc == 5) g_log = argv[4];
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer ends its connection, not the origin
    const std::string listen = argv[1];
    const auto colon = listen.rfind(':');
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_chain_file(context, argv[2]) != 1 ||
        SSL_CTX_use_PrivateKey_file(context, argv[3], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(listen.substr(colon + 1))));
    ::inet_pton(AF_INET, listen.substr(0, colon).c_str(), &address.sin_addr);
    if (::bind(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(server, 64) != 0) {
        std::perror("tls_origin: bind");
        return 1;
    }
    std::printf("listening\n");
    std::fflush(stdout);
    for (;;) {
        const int fd = ::accept(server, nullptr, nullptr);
        if (fd < 0) continue;
        std::thread(serve, context, fd).detach();
    }
}
