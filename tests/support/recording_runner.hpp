// A ProcessRunner for tests: records every request and answers from a script
// of results, so provider code can be exercised without the real tool.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "agentctl/error.hpp"
#include "agentctl/process.hpp"

namespace agentctl::test {

class RecordingProcessRunner final : public ProcessRunner {
public:
    // Answers requests in order; when the script runs out, `fallback` answers.
    void expect(ProcessResult result) { m_script.push_back(std::move(result)); }
    void set_fallback(std::function<ProcessResult(const ProcessRequest&)> fallback) {
        m_fallback = std::move(fallback);
    }

    ProcessResult run(const ProcessRequest& request) override {
        m_requests.push_back(request);
        if (!m_script.empty()) {
            auto result = std::move(m_script.front());
            m_script.pop_front();
            return result;
        }
        if (m_fallback) return m_fallback(request);
        throw Error("unexpected command: " + shell_join(request.argv));
    }

    [[nodiscard]] const std::vector<ProcessRequest>& requests() const { return m_requests; }
    [[nodiscard]] std::vector<std::string> command_lines() const {
        std::vector<std::string> lines;
        for (const auto& r : m_requests) lines.push_back(shell_join(r.argv));
        return lines;
    }

private:
    std::deque<ProcessResult> m_script;
    std::function<ProcessResult(const ProcessRequest&)> m_fallback;
    std::vector<ProcessRequest> m_requests;
};

}  // namespace agentctl::test
