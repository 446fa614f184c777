// image pull REF · image build OUT [--base REF] [--package X]...
#include <fmt/format.h>

#include "cli/commands_list.hpp"
#include "policy/catalog.hpp"

namespace agentctl::cli {

void add_image(CLI::App& app, CommandEnv& env) {
    auto* group = app.add_subcommand("image", "Pull and build sandbox images");
    group->require_subcommand(1);

    auto ref = std::make_shared<std::string>();
    auto* pull = group->add_subcommand("pull", "Copy an image into the local image store");
    pull->add_option("REF", *ref, "Image reference, e.g. debian/12")->required();
    set_examples(*pull, {"agentctl image pull debian/12"});
    pull->callback([&env, ref] {
        env.action = [&env, ref] {
            env.session.gate("image.pull");
            env.session.images().image_pull(*ref);
            return 0;
        };
    });

    struct BuildArgs {
        std::string output;
        std::string base;
        std::vector<std::string> packages;
    };
    auto args = std::make_shared<BuildArgs>();
    auto* build = group->add_subcommand(
        "build", "Build a local image: from a base image plus packages, or (no --base) Debian 12 from scratch");
    build->add_option("OUT", args->output, "Name (alias) of the image to create")->required();
    build->add_option("--base", args->base,
                      "The image to start from; without it, Debian 12 is bootstrapped with debootstrap (Incus, root)");
    build->add_option("--package", args->packages, "A package to install (repeatable)");
    set_examples(*build, {"agentctl image build agentctl-debian-12",
                          "agentctl image build dev-image --base agentctl-debian-12 --package git --package make"});
    build->callback([&env, args] {
        env.action = [&env, args] {
            for (const auto& package : args->packages) policy::check_package_name(package);
            env.session.gate("image.build");
            env.session.images().image_build(args->output, args->base, args->packages);
            return 0;
        };
    });
}

}  // namespace agentctl::cli
