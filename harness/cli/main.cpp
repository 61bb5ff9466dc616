// ckptcheck: proves gradient checkpointing correct and measures what it costs. See README.md.
#include <CLI/CLI.hpp>
#include <iostream>

#include "common/input_error.h"
#include "harness/cli/commands.h"
#include "harness/engine/device_steps.h"
#include "harness/exit_codes.h"
#include "harness/heap_reuse.h"
#include "harness/text_format.h"

int main(int argc, char** argv) {
  ckpt::keepFreedMemoryForReuse();
  CLI::App app{"ckptcheck: verify gradient checkpointing bitwise and measure its memory and FLOP cost"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  int exitCode = ckpt::kExitOk;
  ckpt::cli::addInfo(app, exitCode);
  ckpt::cli::addTrainRef(app, exitCode);
  ckpt::cli::addPlan(app, exitCode);
  ckpt::cli::addRun(app, exitCode);
  ckpt::cli::addValidate(app, exitCode);
  ckpt::cli::addProfile(app, exitCode);
  ckpt::cli::addReport(app, exitCode);
  ckpt::cli::addVerify(app, exitCode);
  ckpt::cli::addMutants(app, exitCode);
  // An error is one line on stderr, even when it quotes input that holds a line break (escapeControl).
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    // CLI11 reports "A subcommand is required" before the word that was meant as one: name it instead.
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      std::string known;
      for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        known += (known.empty() ? "" : ", ") + sub->get_name();
      const std::string word = app.remaining().front();
      msg = word.rfind('-', 0) == 0 ? "option '" + word + "' needs a subcommand before it (one of: " + known + ")"
                                    : "unknown subcommand '" + word + "' (expected one of: " + known + ")";
    }
    std::cerr << "ckptcheck: " << ckpt::escapeControl(msg) << "\n";
    return ckpt::kExitBadInput;
  } catch (const ckpt::InputError& e) {
    std::cerr << "ckptcheck: " << ckpt::escapeControl(e.what()) << "\n";
    return ckpt::kExitBadInput;
  } catch (const ckpt::DeviceUnavailable& e) {
    std::cerr << "ckptcheck: " << ckpt::escapeControl(e.what()) << "\n";
    return ckpt::kExitInfra;
  } catch (const std::bad_alloc&) {
    std::cerr << "ckptcheck: out of memory\n";
    return ckpt::kExitInfra;
  } catch (const std::exception& e) {
    std::cerr << "ckptcheck: internal error: " << ckpt::escapeControl(e.what()) << "\n";
    return ckpt::kExitInfra;
  }
  return exitCode;
}
