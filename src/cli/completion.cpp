#include "cli/completion.hpp"

#include <functional>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "agentctl/provider.hpp"
#include "policy/catalog.hpp"

namespace agentctl::cli {
namespace {

namespace vt = value_type;

bool visible(const CLI::App* app) { return !app->get_group().empty(); }

bool is_positional(const CLI::Option* option) { return option->get_lnames().empty() && option->get_snames().empty(); }

std::string joined(const std::vector<std::string>& words, std::string_view separator = " ") {
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : std::string(separator)) + w;
    return out;
}

// What an option takes, from its CLI11 type name: "" for a flag, "{a b c}" for
// a fixed set (an IsMember check), or a value_type name (SANDBOX, FILE, ...).
std::string value_type_of(const CLI::Option* option) {
    if (option->get_type_size() == 0) return {};
    auto type = option->get_type_name();
    if (auto open = type.find('{'); open != std::string::npos) {
        auto inner = type.substr(open + 1, type.find('}', open) - open - 1);
        for (auto& c : inner) c = c == ',' ? ' ' : c;
        return "{" + inner + "}";
    }
    return type.substr(0, type.find(':'));
}

// Every spelling of an option on the command line: --long and -s.
std::vector<std::string> spellings(const CLI::Option* option) {
    std::vector<std::string> out;
    for (const auto& name : option->get_lnames()) out.push_back("--" + name);
    for (const auto& name : option->get_snames()) out.push_back("-" + name);
    return out;
}

std::vector<std::string> long_flags(const CLI::App* app) {
    std::vector<std::string> flags;
    for (const auto* option : app->get_options()) {
        for (const auto& name : option->get_lnames()) flags.push_back("--" + name);
    }
    return flags;
}

std::vector<const CLI::App*> visible_subcommands(const CLI::App* app) {
    std::vector<const CLI::App*> out;
    for (const auto* sub : app->get_subcommands({})) {
        if (visible(sub)) out.push_back(sub);
    }
    return out;
}

// Calls `visit(path, app)` for the root and every visible subcommand, depth first.
void walk(const CLI::App* app, const std::string& path,
          const std::function<void(const std::string&, const CLI::App*)>& visit) {
    visit(path, app);
    for (const auto* sub : visible_subcommands(app)) {
        walk(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), visit);
    }
}

std::string single_quote_escape(const std::string& text) {
    std::string out;
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out;
}

// The words a static value type offers; empty for dynamic and path types.
std::vector<std::string> static_words(const std::string& type, const CLI::App& root) {
    std::vector<std::string> words;
    if (type == vt::k_agent) {
        for (const auto& agent : policy::agents()) words.emplace_back(agent.name);
    } else if (type == vt::k_preset) {
        for (const auto& preset : policy::presets()) words.emplace_back(preset.name);
    } else if (type == vt::k_config_key || type == vt::k_assignment) {
        for (const auto& key : config_keys()) words.emplace_back(key.name);
    } else if (type == vt::k_command) {
        for (const auto* sub : visible_subcommands(&root)) words.push_back(sub->get_name());
    } else if (type.size() > 2 && type.front() == '{') {
        std::string word;
        for (char c : type.substr(1, type.size() - 2) + " ") {
            if (c != ' ') {
                word += c;
            } else if (!word.empty()) {
                words.push_back(word);
                word.clear();
            }
        }
    }
    return words;
}

// The hidden `agentctl __complete KIND` answers these (see cmd_completion.cpp).
std::string dynamic_kind(const std::string& type) {
    if (type == vt::k_sandbox) return "sandboxes";
    if (type == vt::k_profile) return "profiles";
    return {};
}

bool is_path_type(const std::string& type) { return type == vt::k_file || type == vt::k_path || type == vt::k_dir; }

}  // namespace

std::string bash_completion(const CLI::App& root, std::string_view function) {
    std::string subcommands, commands, flags, flag_values, global_values, positionals;
    const auto global_flags = long_flags(&root);
    for (const auto* option : root.get_options()) {
        const auto type = value_type_of(option);
        if (type.empty()) continue;
        global_values += fmt::format("    {}) echo '{}'; return ;;\n", joined(spellings(option), "|"), type);
    }
    walk(&root, "", [&](const std::string& path, const CLI::App* app) {
        std::vector<std::string> names;
        for (const auto* sub : visible_subcommands(app)) {
            names.push_back(sub->get_name());
            std::vector<std::string> patterns;
            patterns.push_back(fmt::format("\"{}|{}\"", path, sub->get_name()));
            for (const auto& alias : sub->get_aliases()) patterns.push_back(fmt::format("\"{}|{}\"", path, alias));
            commands += fmt::format("    {}) echo '{}' ;;\n", joined(patterns, "|"), sub->get_name());
        }
        if (!names.empty()) subcommands += fmt::format("    \"{}\") echo '{}' ;;\n", path, joined(names));
        auto own = long_flags(app);
        if (app != &root) own.insert(own.end(), global_flags.begin(), global_flags.end());
        flags += fmt::format("    \"{}\") echo '{}' ;;\n", path, joined(own));
        std::vector<std::string> position_types;
        bool repeats = false;
        for (const auto* option : app->get_options()) {
            const auto type = value_type_of(option);
            if (is_positional(option)) {
                position_types.push_back(type);
                repeats = option->get_items_expected_max() > 1;
            } else if (app != &root && !type.empty()) {
                for (const auto& spelling : spellings(option)) {
                    flag_values += fmt::format("    \"{} {}\") echo '{}' ;;\n", path, spelling, type);
                }
            }
        }
        if (!position_types.empty()) {
            std::string cases;
            for (std::size_t i = 0; i < position_types.size(); ++i) {
                const bool last = i + 1 == position_types.size();
                cases += fmt::format("{}) echo '{}' ;; ", last && repeats ? "*" : std::to_string(i), position_types[i]);
            }
            positionals += fmt::format("    \"{}\") case \"$2\" in {}esac ;;\n", path, cases);
        }
    });

    std::string values;
    for (const char* type : {vt::k_agent, vt::k_preset, vt::k_config_key, vt::k_command}) {
        values += fmt::format("    {}) words='{}' ;;\n", type, joined(static_words(type, root)));
    }
    return fmt::format(
        R"SH(# bash completion for agentctl (generated by `agentctl completion bash` from its command tree)
# The command path typed so far ("" or "profile show"), its subcommands, flags,
# the value each flag and positional argument takes, and the values of a type.
{fn}_command() {{
  case "$1|$2" in
{commands}  esac
}}
{fn}_subcommands() {{
  case "$1" in
{subcommands}  esac
}}
{fn}_flags() {{
  case "$1" in
{flags}  esac
}}
{fn}_flag_value() {{
  case "$2" in
{global_values}  esac
  case "$1 $2" in
{flag_values}  esac
}}
{fn}_positional() {{
  case "$1" in
{positionals}  esac
}}
{fn}_values() {{
  local words=""
  case "$1" in
{values}    {assignment}) COMPREPLY=( $(compgen -S = -W '{keys}' -- "$2") ); compopt -o nospace 2>/dev/null; return ;;
    {sandbox}) words="$(agentctl __complete sandboxes 2>/dev/null)" ;;
    {profile}) words="$(agentctl __complete profiles 2>/dev/null)" ;;
    {file}|{path}) COMPREPLY=( $(compgen -f -- "$2") ); compopt -o filenames 2>/dev/null; return ;;
    {dir}) COMPREPLY=( $(compgen -d -- "$2") ); compopt -o filenames 2>/dev/null; return ;;
    "{{"*) words="${{1:1:${{#1}}-2}}" ;;
    *) return ;;
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$2") )
}}
{fn}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" word next i skip=0 npos=0
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    if ((skip)); then skip=0; continue; fi
    case "$word" in
      --) return ;;
      -*=*) continue ;;
      -*) [[ -n "$({fn}_flag_value "$path" "$word")" ]] && skip=1; continue ;;
    esac
    next="$({fn}_command "$path" "$word")"
    if [[ -n "$next" ]]; then path="${{path:+$path }}$next"; npos=0; else npos=$((npos + 1)); fi
  done
  if ((skip)); then
    {fn}_values "$({fn}_flag_value "$path" "${{COMP_WORDS[COMP_CWORD-1]}}")" "$cur"
    return
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$({fn}_flags "$path")" -- "$cur") )
    return
  fi
  local subcommands
  subcommands="$({fn}_subcommands "$path")"
  if [[ -n "$subcommands" ]]; then
    COMPREPLY=( $(compgen -W "$subcommands" -- "$cur") )
    return
  fi
  {fn}_values "$({fn}_positional "$path" "$npos")" "$cur"
}}
complete -o default -F {fn} agentctl
)SH",
        fmt::arg("fn", function), fmt::arg("commands", commands), fmt::arg("subcommands", subcommands),
        fmt::arg("flags", flags), fmt::arg("global_values", global_values), fmt::arg("flag_values", flag_values),
        fmt::arg("positionals", positionals), fmt::arg("values", values), fmt::arg("assignment", vt::k_assignment),
        fmt::arg("keys", joined(static_words(vt::k_config_key, root))), fmt::arg("sandbox", vt::k_sandbox),
        fmt::arg("profile", vt::k_profile), fmt::arg("file", vt::k_file), fmt::arg("path", vt::k_path),
        fmt::arg("dir", vt::k_dir));
}

std::string zsh_completion(const CLI::App& root) {
    // zsh runs the bash functions through its bashcompinit layer, so both shells
    // offer exactly the same words. Installed as _agentctl in $fpath, this file
    // is autoloaded by the first TAB; it then answers that TAB too.
    return "#compdef agentctl\n"
           "# zsh completion for agentctl (generated by `agentctl completion zsh` from its command tree)\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bash_completion(root, "__agentctl_bash") +
           "if [[ \"${funcstack[1]}\" == _agentctl ]]; then\n"
           "  _bash_complete -o default -F __agentctl_bash\n"
           "fi\n";
}

std::string fish_completion(const CLI::App& root) {
    std::string known_commands;
    std::vector<std::string> value_flags;
    walk(&root, "", [&](const std::string& path, const CLI::App* app) {
        for (const auto* sub : visible_subcommands(app)) {
            std::vector<std::string> patterns{fmt::format("'{}|{}'", path, sub->get_name())};
            for (const auto& alias : sub->get_aliases()) patterns.push_back(fmt::format("'{}|{}'", path, alias));
            known_commands += fmt::format("        case {}\n            echo {}\n", joined(patterns), sub->get_name());
        }
        for (const auto* option : app->get_options()) {
            if (is_positional(option) || value_type_of(option).empty()) continue;
            for (const auto& s : spellings(option)) {
                if (std::find(value_flags.begin(), value_flags.end(), s) == value_flags.end()) value_flags.push_back(s);
            }
        }
    });

    std::string out = fmt::format(
        R"FISH(# fish completion for agentctl (generated by `agentctl completion fish` from its command tree)
complete -c agentctl -f
function __agentctl_command --description 'the subcommand WORD names at PATH, if any'
    switch "$argv[1]|$argv[2]"
{}    end
end
function __agentctl_path --description 'the agentctl command path typed so far'
    set -l path ''
    set -l skip 0
    for word in (commandline -opc)[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $word
            case '--'
                break
            case '-*=*'
                continue
            case '-*'
                contains -- $word {} ; and set skip 1
                continue
        end
        set -l next (__agentctl_command "$path" $word)
        test -n "$next"; and set path (string trim -- "$path $next")
    end
    echo $path
end
function __agentctl_at --description 'true when the command path typed so far is PATH'
    test (__agentctl_path) = "$argv[1]"
end
)FISH",
        known_commands, joined(value_flags));

    // The arguments that offer a value of `type` (empty: nothing to offer).
    auto values_of = [&](const std::string& type) -> std::string {
        if (is_path_type(type)) return " -F";
        if (auto kind = dynamic_kind(type); !kind.empty()) {
            return fmt::format(" -a '(agentctl __complete {} 2>/dev/null)'", kind);
        }
        if (type == vt::k_assignment) {
            std::string words;
            for (const auto& key : static_words(type, root)) words += (words.empty() ? "" : " ") + key + "=";
            return fmt::format(" -a '{}'", words);
        }
        auto words = static_words(type, root);
        return words.empty() ? std::string() : fmt::format(" -a '{}'", joined(words));
    };

    walk(&root, "", [&](const std::string& path, const CLI::App* app) {
        const auto condition = fmt::format("__agentctl_at '{}'", path);
        for (const auto* sub : visible_subcommands(app)) {
            out += fmt::format("complete -c agentctl -n \"{}\" -a {} -d '{}'\n", condition, sub->get_name(),
                               single_quote_escape(sub->get_description()));
        }
        for (const auto* option : app->get_options()) {
            const auto type = value_type_of(option);
            if (is_positional(option)) {
                if (!visible_subcommands(app).empty()) continue;
                auto values = values_of(type);
                if (!values.empty()) out += fmt::format("complete -c agentctl -n \"{}\"{}\n", condition, values);
                continue;
            }
            std::string line = "complete -c agentctl";
            if (app != &root) line += fmt::format(" -n \"{}\"", condition);
            for (const auto& name : option->get_lnames()) line += " -l " + name;
            for (const auto& name : option->get_snames()) line += " -s " + name;
            if (!type.empty()) line += " -r";  // the option takes a value
            out += line + values_of(type) + fmt::format(" -d '{}'\n", single_quote_escape(option->get_description()));
        }
    });
    return out;
}

}  // namespace agentctl::cli
