// A file descriptor owned by one object: closed when it goes.
#pragma once

#include <unistd.h>

namespace agentctl::core {

class UniqueFd {
public:
    explicit UniqueFd(int fd = -1) : m_fd(fd) {}
    ~UniqueFd() {
        if (m_fd >= 0) ::close(m_fd);
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    [[nodiscard]] int get() const { return m_fd; }

private:
    int m_fd;
};

}  // namespace agentctl::core
