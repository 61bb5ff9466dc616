#include "harness/validate/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

namespace ckpt {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr int64_t kMaxElements = int64_t{1} << 34;  // 16 Gi elements: larger is a corrupt header, not a tensor

struct TypeInfo {
  NpyType type;
  const char* descr;
  int size;
};
constexpr TypeInfo kTypes[] = {
    {NpyType::kFloat32, "<f4", 4}, {NpyType::kFloat64, "<f8", 8}, {NpyType::kInt64, "<i8", 8},
    {NpyType::kInt32, "<i4", 4},   {NpyType::kUInt8, "|u1", 1},   {NpyType::kBool, "|b1", 1},
};

// A tiny reader of the header's Python literal: {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  std::map<std::string, std::string> strings;
  std::map<std::string, bool> bools;
  std::optional<std::vector<int64_t>> shape;

  void parse() {
    expect('{');
    skipSpace();
    while (peek() != '}') {
      const std::string key = quoted();
      expect(':');
      skipSpace();
      if (key == "shape") {
        shape = tuple();
      } else if (peek() == '\'' || peek() == '"') {
        strings[key] = quoted();
      } else if (s_.compare(i_, 4, "True") == 0) {
        bools[key] = true;
        i_ += 4;
      } else if (s_.compare(i_, 5, "False") == 0) {
        bools[key] = false;
        i_ += 5;
      } else {
        fail("unsupported value for header key '" + key + "'");
      }
      skipSpace();
      if (peek() == ',') {
        ++i_;
        skipSpace();
      } else if (peek() != '}') {
        fail("expected ',' or '}' in the header");
      }
    }
    ++i_;
    skipSpace();
    if (i_ != s_.size()) fail("trailing characters after the header dictionary");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw NpyError(origin_ + ": " + what); }
  char peek() const {
    if (i_ >= s_.size()) fail("header ends early");
    return s_[i_];
  }
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skipSpace();
    if (peek() != c) fail(std::string("expected '") + c + "' in the header");
    ++i_;
  }
  std::string quoted() {
    skipSpace();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted key or string in the header");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string in the header");
    std::string v = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    skipSpace();
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    skipSpace();
    while (peek() != ')') {
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("shape must be a tuple of non-negative integers");
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("shape dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      // Python 2 era writers append 'L' to longs.
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;
      dims.push_back(v);
      skipSpace();
      if (peek() == ',') {
        ++i_;
        skipSpace();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
    }
    ++i_;
    return dims;
  }

  const std::string& s_;
  const std::string& origin_;
  size_t i_ = 0;
};

const TypeInfo& info(NpyType t) {
  for (const auto& ti : kTypes)
    if (ti.type == t) return ti;
  throw std::logic_error("npy: unknown type");
}

std::optional<NpyType> typeFromDescr(std::string d) {
  if (d.size() != 3) return std::nullopt;
  // Byte order is irrelevant for one-byte types; '=' (native) is little-endian on every host this builds on.
  if (d[2] == '1') d[0] = '|';
  else if (d[0] == '=') d[0] = '<';
  for (const auto& ti : kTypes)
    if (d == ti.descr) return ti.type;
  return std::nullopt;
}

}  // namespace

const char* npyDescr(NpyType t) { return info(t).descr; }
int npyItemSize(NpyType t) { return info(t).size; }

int64_t NpyArray::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

void writeNpy(const std::string& path, NpyType type, const std::vector<int64_t>& shape, const void* data) {
  std::string header =
      std::string("{'descr': '") + npyDescr(type) + "', 'fortran_order': False, 'shape': " + shapeText(shape) + ", }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces and ended by '\n' to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) throw NpyError(path + ": header too long for .npy version 1.0");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw NpyError(path + ": negative dimension in shape " + shapeText(shape));
    n *= d;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw NpyError(path + ": cannot be written");
  out.write(reinterpret_cast<const char*>(kMagic), sizeof kMagic);
  const unsigned char version[2] = {1, 0};
  out.write(reinterpret_cast<const char*>(version), 2);
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  const unsigned char len[2] = {static_cast<unsigned char>(hlen & 0xff), static_cast<unsigned char>(hlen >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n * npyItemSize(type)));
  if (!out) throw NpyError(path + ": write failed");
}

void writeNpyInt64(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data) {
  writeNpy(path, NpyType::kInt64, shape, data);
}

NpyArray parseNpy(const std::vector<unsigned char>& f, const std::string& origin) {
  auto fail = [&](const std::string& what) -> NpyError { return NpyError(origin + ": " + what); };
  if (f.size() < 10 || std::memcmp(f.data(), kMagic, sizeof kMagic) != 0)
    throw fail("not a .npy file (missing the \\x93NUMPY magic)");
  const int major = f[6];
  size_t hlen, start;
  if (major == 1) {
    hlen = f[8] | (size_t{f[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) throw fail("truncated header");
    hlen = f[8] | (size_t{f[9]} << 8) | (size_t{f[10]} << 16) | (size_t{f[11]} << 24);
    start = 12;
  } else {
    throw fail("unsupported .npy version " + std::to_string(major) + "." + std::to_string(f[7]));
  }
  if (start + hlen > f.size()) throw fail("truncated header (" + std::to_string(hlen) + " bytes announced)");
  const std::string header(reinterpret_cast<const char*>(f.data() + start), hlen);
  HeaderParser p(header, origin);
  p.parse();
  if (!p.strings.count("descr")) throw fail("header has no 'descr'");
  if (!p.bools.count("fortran_order")) throw fail("header has no 'fortran_order'");
  if (!p.shape) throw fail("header has no 'shape'");
  if (p.bools.at("fortran_order")) throw fail("fortran_order True is not supported (write C-ordered arrays)");
  const std::string descr = p.strings.at("descr");
  const auto type = typeFromDescr(descr);
  if (!type) {
    if (!descr.empty() && descr[0] == '>') throw fail("big-endian dtype '" + descr + "' is not supported");
    throw fail("unsupported dtype '" + descr + "' (expected one of <f4, <f8, <i8, <i4, |u1, |b1)");
  }
  NpyArray a;
  a.type = *type;
  a.shape = *p.shape;
  int64_t n = 1;
  for (int64_t d : a.shape) {
    if (d > 0 && n > kMaxElements / d) throw fail("shape " + shapeText(a.shape) + " is implausibly large");
    n *= d;
  }
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(npyItemSize(a.type));
  const size_t have = f.size() - start - hlen;
  if (have != bytes)
    throw fail("data is " + std::to_string(have) + " bytes, but shape " + shapeText(a.shape) + " of " + descr +
               " needs " + std::to_string(bytes));
  a.bytes.assign(f.begin() + static_cast<std::ptrdiff_t>(start + hlen), f.end());
  return a;
}

NpyArray readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError(path + ": missing or unreadable");
  std::vector<unsigned char> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parseNpy(f, path);
}

template <class T>
std::vector<T> npyValues(const NpyArray& a, const std::string& origin, bool allowIntegral) {
  const size_t n = static_cast<size_t>(a.count());
  std::vector<T> v(n);
  auto convert = [&](auto tag) {
    using S = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      S s;
      std::memcpy(&s, a.bytes.data() + i * sizeof(S), sizeof(S));
      // Exact iff |s| <= 2^digits; checked on the integer, since converting a large value back from T (2^63 from
      // int64 max) would be undefined behaviour (the npy fuzz target found it).
      constexpr int64_t kExact = int64_t{1} << std::numeric_limits<T>::digits;
      const auto wide = static_cast<int64_t>(s);
      if (wide > kExact || wide < -kExact)
        throw NpyError(origin + ": integer value " + std::to_string(s) + " is not exact in the case's dtype");
      v[i] = static_cast<T>(s);
    }
  };
  if (a.type == npyTypeOf<T>()) {
    if (n) std::memcpy(v.data(), a.bytes.data(), n * sizeof(T));
    return v;
  }
  const bool integral =
      a.type == NpyType::kInt64 || a.type == NpyType::kInt32 || a.type == NpyType::kUInt8 || a.type == NpyType::kBool;
  if (!integral || !allowIntegral)
    throw NpyError(origin + ": dtype " + npyDescr(a.type) + " where the case's dtype " + npyDescr(npyTypeOf<T>()) +
                   " is required");
  switch (a.type) {
    case NpyType::kInt64:
      convert(int64_t{});
      break;
    case NpyType::kInt32:
      convert(int32_t{});
      break;
    case NpyType::kUInt8:
    case NpyType::kBool:
      convert(uint8_t{});
      break;
    default:
      break;
  }
  return v;
}

template std::vector<float> npyValues<float>(const NpyArray&, const std::string&, bool);
template std::vector<double> npyValues<double>(const NpyArray&, const std::string&, bool);

}  // namespace ckpt
