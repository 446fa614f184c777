// Files agentctl writes: always atomically (temp file in the same directory,
// fsync, rename), so a crash or Ctrl-C leaves either the old or the new content.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::core {

// Writes `content` to `path` atomically with the given mode; creates parent
// directories (mode 0700). Throws agentctl::Error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content, unsigned mode = 0600);

// Reads a whole file. Throws agentctl::Error naming the path on failure.
[[nodiscard]] std::string read_file(const std::filesystem::path& path);
// nullopt when the file does not exist; throws on any other failure.
[[nodiscard]] std::optional<std::string> read_file_if_exists(const std::filesystem::path& path);

// An exclusive advisory lock (flock) on a lock file, held for the object's
// lifetime. Two agentctl processes acting on one sandbox are serialised.
// When another process holds the lock, `on_wait` (if set) is called once
// before blocking, so the person at the terminal knows why nothing happens.
class FileLock {
public:
    explicit FileLock(const std::filesystem::path& path, const std::function<void()>& on_wait = {});
    ~FileLock();
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

    // The lock if no other process holds it now, else null (never waits).
    // Without `create`, a lock file that does not exist is free: null is not
    // returned, and nothing is created (a lock that nobody took is held by
    // nobody).
    [[nodiscard]] static std::unique_ptr<FileLock> try_acquire(const std::filesystem::path& path, bool create = true);
    // True when the lock was free (try_acquire without creating a file).
    [[nodiscard]] bool held() const { return m_fd >= 0; }

private:
    FileLock() = default;
    int m_fd = -1;
};

}  // namespace agentctl::core
