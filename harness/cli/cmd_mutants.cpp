// ckptcheck mutants: the catalogue of deliberately broken engines (harness/mutants/), one line each: the bug
// and the real-world report it models (with --json also the property that must catch it and its finding's class).
// `ckptcheck verify --mutant NAME` must find each of them.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/mutants/catalog.h"

namespace ckpt::cli {

void addMutants(CLI::App& app, int& exitCode) {
  auto json = std::make_shared<bool>(false);
  auto* cmd =
      app.add_subcommand("mutants", "List the mutant catalogue: broken engines modelled on real checkpointing bugs");
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->callback([json, &exitCode] {
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& m : mutantCatalog())
        j.push_back({{"name", m.name},
                     {"bug", m.bug},
                     {"reference", m.reference},
                     {"shows_when", m.showsWhen},
                     {"caught_by", m.caughtBy},
                     {"class", findingClassName(m.diagnosis)}});
      std::cout << j.dump(2) << "\n";
    } else {
      size_t width = 0;
      for (const auto& m : mutantCatalog()) width = std::max(width, m.name.size());
      for (const auto& m : mutantCatalog())
        std::cout << m.name << std::string(width + 2 - m.name.size(), ' ') << m.bug << " [" << m.reference << "]\n";
    }
    exitCode = 0;
  });
}

}  // namespace ckpt::cli
