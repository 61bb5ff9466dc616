// The .npy file format (NumPy's NEP 1), the tensor format of the adapter protocol (harness/adapters/PROTOCOL.md).
// Written: version 1.0, little-endian, C order, the header padded so the data starts on a 64-byte boundary, as
// numpy.save writes it. Read: versions 1.0, 2.0 and 3.0, little-endian (or byte-order-free) numeric types, C order
// only. Every malformed file is an NpyError that names the file and what is wrong with it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ckpt {

class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The numeric types the protocol uses.
enum class NpyType { kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool };
const char* npyDescr(NpyType t);  // "<f4", "<f8", "<i8", "<i4", "|u1", "|b1"
int npyItemSize(NpyType t);

struct NpyArray {
  NpyType type = NpyType::kFloat64;
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<unsigned char> bytes;
  int64_t count() const;  // product of shape (1 for a scalar)
};

std::string shapeText(const std::vector<int64_t>& shape);  // "(2, 3)", "(4,)", "()"

template <class T>
constexpr NpyType npyTypeOf() {
  if constexpr (sizeof(T) == 4) return NpyType::kFloat32;
  else return NpyType::kFloat64;
}

void writeNpy(const std::string& path, NpyType type, const std::vector<int64_t>& shape, const void* data);
template <class T>
void writeNpy(const std::string& path, const std::vector<int64_t>& shape, const T* data) {
  writeNpy(path, npyTypeOf<T>(), shape, data);
}
void writeNpyInt64(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data);

// Parses a whole file; throws NpyError("<path>: ...").
NpyArray readNpy(const std::string& path);
NpyArray parseNpy(const std::vector<unsigned char>& file, const std::string& origin);

// The array's elements as T, in C order. Floating types must be exactly T's (a float64 tensor in a float32 case
// has lost or invented precision: a protocol error); integral types (counters, state bytes) convert when
// `allowIntegral`, exactly as long as they fit T's significand.
template <class T>
std::vector<T> npyValues(const NpyArray& a, const std::string& origin, bool allowIntegral);

}  // namespace ckpt
