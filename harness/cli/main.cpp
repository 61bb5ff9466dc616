// ckptcheck: proves gradient checkpointing correct and measures what it costs. See README.md.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cases/input_error.h"
#include "harness/cli/commands.h"
#include "harness/exit_codes.h"

int main(int argc, char** argv) {
  CLI::App app{"ckptcheck: verify gradient checkpointing bitwise and measure its memory and FLOP cost"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  int exitCode = ckpt::kExitOk;
  ckpt::cli::addInfo(app, exitCode);
  ckpt::cli::addTrainRef(app, exitCode);
  ckpt::cli::addPlan(app, exitCode);
  ckpt::cli::addRun(app, exitCode);
  ckpt::cli::addValidate(app, exitCode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ckptcheck: " << e.what() << "\n";
    return ckpt::kExitBadInput;
  } catch (const ckpt::InputError& e) {
    std::cerr << "ckptcheck: " << e.what() << "\n";
    return ckpt::kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "ckptcheck: out of memory\n";
    return ckpt::kExitInfra;
  } catch (const std::exception& e) {
    std::cerr << "ckptcheck: internal error: " << e.what() << "\n";
    return ckpt::kExitInfra;
  }
  return exitCode;
}
