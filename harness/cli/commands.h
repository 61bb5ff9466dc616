// Each subcommand registers itself on the app; its callback sets the process exit code.
#pragma once
#include <CLI/CLI.hpp>

namespace ckpt::cli {

void addInfo(CLI::App& app, int& exitCode);
void addTrainRef(CLI::App& app, int& exitCode);
void addPlan(CLI::App& app, int& exitCode);
void addRun(CLI::App& app, int& exitCode);
void addValidate(CLI::App& app, int& exitCode);
void addProfile(CLI::App& app, int& exitCode);
void addReport(CLI::App& app, int& exitCode);
void addVerify(CLI::App& app, int& exitCode);
void addMutants(CLI::App& app, int& exitCode);

}  // namespace ckpt::cli
