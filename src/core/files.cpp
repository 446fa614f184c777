#include "core/files.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::core {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int err) {
    throw Error(what + " " + path.string() + ": " + std::strerror(err));
}

void write_all(int fd, std::string_view content, const std::filesystem::path& path) {
    while (!content.empty()) {
        ssize_t n = ::write(fd, content.data(), content.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("cannot write", path, errno);
        }
        content.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content, unsigned mode) {
    auto dir = path.parent_path();
    if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw Error("cannot create directory " + dir.string() + ": " + ec.message());
    }
    std::string tmp = (dir / fmt::format(".{}.tmpXXXXXX", path.filename().string())).string();
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) fail("cannot create a temporary file next to", path, errno);
    try {
        if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) fail("cannot set mode of", tmp, errno);
        write_all(fd, content, tmp);
        if (::fsync(fd) != 0) fail("cannot sync", tmp, errno);
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot replace", path, err);
    }
    if (!dir.empty()) {
        int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            ::fsync(dfd);
            ::close(dfd);
        }
    }
}

std::optional<std::string> read_file_if_exists(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (errno == ENOENT) return std::nullopt;
        fail("cannot read", path, errno);
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::string read_file(const std::filesystem::path& path) {
    auto content = read_file_if_exists(path);
    if (!content) throw Error("cannot read " + path.string() + ": No such file or directory");
    return *content;
}

FileLock::FileLock(const std::filesystem::path& path, const std::function<void()>& on_wait) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (m_fd < 0) fail("cannot open lock file", path, errno);
    if (::flock(m_fd, LOCK_EX | LOCK_NB) == 0) return;
    if (errno == EWOULDBLOCK && on_wait) on_wait();
    while (::flock(m_fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(m_fd);
        fail("cannot lock", path, err);
    }
}

std::unique_ptr<FileLock> FileLock::try_acquire(const std::filesystem::path& path, bool create) {
    std::unique_ptr<FileLock> lock(new FileLock());
    if (create) {
        std::error_code ec;
        std::filesystem::create_directories(path.parent_path(), ec);
    }
    lock->m_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (lock->m_fd < 0) {
        if (errno == ENOENT && !create) return lock;
        fail("cannot open lock file", path, errno);
    }
    while (::flock(lock->m_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return nullptr;
        fail("cannot lock", path, errno);
    }
    return lock;
}

FileLock::~FileLock() {
    if (m_fd >= 0) ::close(m_fd);  // closing releases the lock
}

}  // namespace agentctl::core
