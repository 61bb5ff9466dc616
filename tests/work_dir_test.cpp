// validate's scratch directory (harness/validate/work_dir.h): under $CKPT_SCRATCH (or /dev/shm) and removed
// afterwards; OUT/work and kept with --keep-work; OUT/work when the scratch root cannot take it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/validate/work_dir.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

struct WorkDirTest : ::testing::Test {
  fs::path base = fs::temp_directory_path() / ("ckpt_work_dir_test_" + std::to_string(::getpid()));
  fs::path out = base / "out";
  fs::path root = base / "root";
  void SetUp() override {
    fs::remove_all(base);
    fs::create_directories(out);
    fs::create_directories(root);
    ::setenv("CKPT_SCRATCH", root.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("CKPT_SCRATCH");
    fs::remove_all(base);
  }
};

TEST_F(WorkDirTest, aFreshDirectoryUnderTheRootRemovedAfterwards) {
  fs::path made;
  {
    WorkDir a(out, false), b(out, false);
    made = a.path();
    EXPECT_EQ(made.parent_path(), root);
    EXPECT_NE(a.path(), b.path());
    EXPECT_TRUE(fs::is_directory(made));
    fs::create_directories(made / "e0");
    std::ofstream(made / "e0" / "x.npy") << "x";
  }
  EXPECT_FALSE(fs::exists(made));
  EXPECT_TRUE(fs::is_empty(root));
  EXPECT_FALSE(fs::exists(out / "work"));
}

TEST_F(WorkDirTest, keepWorkIsOutWorkAndStays) {
  {
    WorkDir k(out, true);
    EXPECT_EQ(k.path(), out / "work");
    fs::create_directories(k.path() / "e0");
    k.remove();
  }
  EXPECT_TRUE(fs::is_directory(out / "work" / "e0"));
}

TEST_F(WorkDirTest, aRootThatCannotTakeItFallsBackToOutWork) {
  ::setenv("CKPT_SCRATCH", (base / "missing").c_str(), 1);
  WorkDir s(out, false);
  EXPECT_EQ(s.path(), out / "work");
}

}  // namespace
}  // namespace ckpt
