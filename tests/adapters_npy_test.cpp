// The .npy reader and writer of the adapter protocol: round trips, and every malformed file rejected with a message
// that names the file and the problem.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "harness/validate/npy.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

std::string tempPath(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ckpt_npy_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<unsigned char> fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file by hand: magic, version, header text (padded to 64 with '\n'), data.
std::vector<unsigned char> handMade(const std::string& header, size_t dataBytes, int major = 1) {
  std::vector<unsigned char> f = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  std::string h = header;
  const size_t lenBytes = major == 1 ? 2 : 4;
  while ((8 + lenBytes + h.size() + 1) % 64) h += ' ';
  h += '\n';
  for (size_t i = 0; i < lenBytes; ++i) f.push_back(static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff));
  f.insert(f.end(), h.begin(), h.end());
  f.insert(f.end(), dataBytes, 0);
  return f;
}

TEST(Npy, roundTripsDoubleMatrix) {
  const std::vector<double> v = {1.5, -0.0, 3e-300, 7};
  const std::string p = tempPath("d.npy");
  writeNpy<double>(p, {2, 2}, v.data());
  const NpyArray a = readNpy(p);
  EXPECT_EQ(a.type, NpyType::kFloat64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  const auto back = npyValues<double>(a, p, false);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(std::memcmp(back.data(), v.data(), sizeof(double) * 4), 0);  // bitwise, -0.0 included
  EXPECT_EQ(fileBytes(p).size() % 64, (4 * sizeof(double)) % 64) << "data must start on a 64-byte boundary";
}

TEST(Npy, roundTripsScalarVectorAndEmpty) {
  const float x = 0.25f;
  const std::string p = tempPath("s.npy");
  writeNpy<float>(p, {}, &x);
  NpyArray a = readNpy(p);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.count(), 1);
  EXPECT_EQ(npyValues<float>(a, p, false)[0], 0.25f);

  const std::vector<float> v = {1, 2, 3};
  writeNpy<float>(p, {3}, v.data());
  a = readNpy(p);
  EXPECT_EQ(shapeText(a.shape), "(3,)");

  writeNpy<float>(p, {0, 4}, v.data());
  a = readNpy(p);
  EXPECT_EQ(a.count(), 0);
  EXPECT_TRUE(npyValues<float>(a, p, false).empty());
}

TEST(Npy, integralConvertsOnlyWhenAllowedAndExact) {
  const int64_t n[2] = {2, 7};
  const std::string p = tempPath("i.npy");
  writeNpyInt64(p, {2}, n);
  const NpyArray a = readNpy(p);
  EXPECT_EQ(a.type, NpyType::kInt64);
  EXPECT_EQ(npyValues<double>(a, p, true), (std::vector<double>{2, 7}));
  EXPECT_THROW(npyValues<double>(a, p, false), NpyError);
  const int64_t big = (int64_t{1} << 40) + 1;
  writeNpyInt64(p, {}, &big);
  EXPECT_THROW(npyValues<float>(readNpy(p), p, true), NpyError);  // not exact in float
  // Near INT64_MAX (the npy fuzz target's find): refused as inexact, without converting 2^63 back to int64.
  for (const int64_t edge : {std::numeric_limits<int64_t>::max() - 21, std::numeric_limits<int64_t>::min()}) {
    writeNpyInt64(p, {}, &edge);
    EXPECT_THROW(npyValues<double>(readNpy(p), p, true), NpyError) << edge;
  }
  // The largest exact magnitudes still convert.
  const int64_t exact[2] = {int64_t{1} << 53, -(int64_t{1} << 53)};
  writeNpyInt64(p, {2}, exact);
  EXPECT_EQ(npyValues<double>(readNpy(p), p, true), (std::vector<double>{0x1p53, -0x1p53}));
}

TEST(Npy, floatTypeMustMatchTheCase) {
  const double d = 1;
  const std::string p = tempPath("m.npy");
  writeNpy<double>(p, {}, &d);
  try {
    npyValues<float>(readNpy(p), p, true);
    FAIL() << "float64 accepted in a float32 case";
  } catch (const NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("<f8"), std::string::npos) << e.what();
  }
}

void expectRejected(const std::vector<unsigned char>& f, const std::string& needle) {
  try {
    parseNpy(f, "x.npy");
    FAIL() << "accepted; expected an error mentioning '" << needle << "'";
  } catch (const NpyError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("x.npy: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(Npy, rejectsMalformedFiles) {
  expectRejected({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}, "magic");
  expectRejected({0x93, 'N', 'U', 'M'}, "magic");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 32), "fortran_order");
  expectRejected(handMade("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", 16), "big-endian");
  expectRejected(handMade("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }", 32), "unsupported dtype");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': False, }", 8), "no 'shape'");
  expectRejected(handMade("{'descr': '<f8', 'shape': (1,), }", 8), "no 'fortran_order'");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 40), "needs 48");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -3), }", 0), "shape");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)", 48), "header");
  expectRejected(handMade("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8, 9), "version 9");
  auto truncated = handMade("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8);
  truncated.resize(20);
  expectRejected(truncated, "truncated");
}

TEST(Npy, readsVersion2AndPythonStyleHeaders) {
  // Version 2.0 (4-byte header length), double quotes, no trailing comma, a Python 2 long.
  const NpyArray a =
      parseNpy(handMade("{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (3L,)}", 24, 2), "v2.npy");
  EXPECT_EQ(a.type, NpyType::kInt64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  // One-byte types in any byte order.
  EXPECT_EQ(parseNpy(handMade("{'descr': '<u1', 'fortran_order': False, 'shape': (5,), }", 5), "u.npy").type,
            NpyType::kUInt8);
}

TEST(Npy, missingFileNamesThePath) {
  try {
    readNpy("/nonexistent/dir/g.npy");
    FAIL();
  } catch (const NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/g.npy"), std::string::npos);
  }
}

RC_GTEST_PROP(Npy, anyShapeAndValuesRoundTripBitwise, (const std::vector<double>& values, uint8_t split)) {
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t rows = n == 0 ? 0 : 1 + split % n;
  std::vector<int64_t> shape =
      (rows > 0 && n % rows == 0) ? std::vector<int64_t>{rows, n / rows} : std::vector<int64_t>{n};
  const std::string p = tempPath("prop.npy");
  writeNpy<double>(p, shape, values.data());
  const NpyArray a = readNpy(p);
  RC_ASSERT(a.shape == shape);
  const auto back = npyValues<double>(a, p, false);
  RC_ASSERT(back.size() == values.size());
  // Parenthesised: RC_ASSERT captures its operands, so a bare || would not short-circuit (memcmp on nullptr).
  RC_ASSERT((values.empty() || std::memcmp(back.data(), values.data(), values.size() * sizeof(double)) == 0));
}

}  // namespace
}  // namespace ckpt
