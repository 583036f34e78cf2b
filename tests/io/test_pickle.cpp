// io/serialization/pickle: round trips of every kind of value, pickles written by CPython at
// protocols 0-5 (tests/reference/pickle_reference.py), ours read back by CPython, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "io/serialization/pickle.h"
#include "io/serialization/torch_save.h"
#include "tests/io/io_test_util.h"

using megacpp::io::serialization::pickle;
using megacpp::io::serialization::PickleHooks;
using megacpp::io::serialization::PyValue;
using megacpp::io::serialization::RawTensor;
using megacpp::io::serialization::unpickle;
using megacpp::io::serialization::UnpickleHooks;
using megacpp::io_test::error_of;
using megacpp::io_test::read_bytes;
using megacpp::io_test::reference_passes;
using megacpp::io_test::TempDir;
using megacpp::io_test::write_bytes;
using Kind = PyValue::Kind;

namespace {

PyValue str(const std::string& s) { return PyValue::string(s); }
// A byte string literal with its NULs.
template <size_t N>
std::string raw(const char (&s)[N]) {
  return std::string(s, N - 1);
}
PyValue num(int64_t v) { return PyValue::integer(v); }

PyValue ints(std::initializer_list<int64_t> values) {
  std::vector<PyValue> items;
  for (int64_t v : values) items.push_back(num(v));
  return PyValue::list(std::move(items));
}

PyValue dataclass(const std::string& name, std::vector<std::pair<PyValue, PyValue>> fields) {
  return PyValue::object(PyValue::global("pickle_sample", name), PyValue::tuple({}), PyValue::dict(std::move(fields)),
                         /*newobj=*/true);
}

// tests/reference/pickle_sample.py's sample(), as PyValues.
PyValue sample_value(bool with_objects) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes += static_cast<char>(i);
  std::vector<PyValue> long_list;
  for (int i = 0; i < 2500; ++i) long_list.push_back(num(i));
  std::vector<std::pair<PyValue, PyValue>> big_dict;
  for (int i = 0; i <= 1000; ++i) big_dict.emplace_back(str(std::to_string(i)), num(i));
  const PyValue shared = PyValue::list({num(1), str("two")});
  std::vector<std::pair<PyValue, PyValue>> items = {
      {str("ints"),
       ints({0, 1, -1, 255, 256, 65535, 65536, -(int64_t{1} << 31), (int64_t{1} << 31) - 1, int64_t{1} << 31,
             -(int64_t{1} << 31) - 1, int64_t{1} << 39, -(int64_t{1} << 39), int64_t{1} << 40, -(int64_t{1} << 40),
             std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})},
      {str("floats"),
       PyValue::tuple({PyValue::real(0.0), PyValue::real(-0.0), PyValue::real(1.5), PyValue::real(-2.25e-300),
                       PyValue::real(1e300), PyValue::real(0.1), PyValue::real(inf), PyValue::real(-inf)})},
      {str("strings"),
       PyValue::list({str(""), str("ascii"),
                      str("na\xc3\xafve \xe2\x80\x93 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x9a\x80"),
                      str("quote's\\\n\r"), str(std::string(300, 'x'))})},
      {str("bytes"), PyValue::list({PyValue::bytes(""),
                                    PyValue::bytes(std::string("\x00\xff\x80"
                                                               "abc",
                                                               6)),
                                    PyValue::bytes(all_bytes)})},
      {str("bytearray"), PyValue::bytes("\x01\xfe")},
      {str("nested"),
       PyValue::dict(
           {{str("a"),
             PyValue::tuple(
                 {num(1),
                  PyValue::tuple({num(2), PyValue::list({num(3), PyValue::dict({{str("b"), PyValue::none()}})})})})},
            {str("empty"), PyValue::tuple({PyValue::tuple({}), PyValue::list({}), PyValue::dict({})})}})},
      {str("bools"), PyValue::tuple({PyValue::boolean(true), PyValue::boolean(false)})},
      {str("tuples"),
       PyValue::tuple({PyValue::tuple({num(1)}), PyValue::tuple({num(1), num(2)}),
                       PyValue::tuple({num(1), num(2), num(3)}), PyValue::tuple({num(1), num(2), num(3), num(4)})})},
      {str("long_list"), PyValue::list(long_list)},
      {str("big_dict"), PyValue::dict(big_dict)},
      {str("shared"), PyValue::list({shared, shared})},
      {num(7), str("int key")},
  };
  if (with_objects) {
    items.emplace_back(str("point"), dataclass("Point", {{str("x"), num(1)}, {str("y"), PyValue::real(2.5)}}));
    items.emplace_back(
        str("keyed"),
        PyValue::dict({{dataclass("Key", {{str("name"), str("w")}, {str("offset"), PyValue::tuple({num(0), num(4)})}}),
                        dataclass("Point", {{str("x"), num(3)}, {str("y"), PyValue::real(4.0)}})},
                       {dataclass("Key", {{str("name"), str("b")}, {str("offset"), PyValue::none()}}), str("bias")}}));
  }
  return PyValue::dict(std::move(items));
}

// Runs pickle_reference.py; fails the test on a non-zero exit.
}  // namespace

TEST(Pickle, RoundTripsEveryKind) {
  auto t = std::make_shared<RawTensor>(
      RawTensor::contiguous(megacpp::io::serialization::DType::kInt16, {2}, std::string("\x01\x00\x02\x00", 4)));
  const PyValue value = PyValue::tuple({
      sample_value(true),
      PyValue::global("torch", "float32"),
      PyValue::object(PyValue::global("torch", "Size"), PyValue::tuple({PyValue::tuple({num(2), num(3)})})),
      PyValue::object(PyValue::global("m", "C"), PyValue::tuple({}), PyValue::tuple({num(1), PyValue::none()}), true),
      PyValue::tensor(t),
  });
  PickleHooks hooks;
  hooks.reduce_tensor = [](const PyValue& v) {
    return PyValue::object(PyValue::global("test", "tensor"),
                           PyValue::tuple({PyValue::bytes(v.tensor().contiguous_bytes())}));
  };
  const std::string bytes = pickle(value, hooks);
  EXPECT_EQ(bytes.substr(0, 2), "\x80\x02");
  UnpickleHooks back;
  back.resolve_reduce = [&](const PyValue& callable, const PyValue& args) -> std::optional<PyValue> {
    if (!callable.is_global("test", "tensor")) return std::nullopt;
    return PyValue::tensor(std::make_shared<RawTensor>(
        RawTensor::contiguous(megacpp::io::serialization::DType::kInt16, {2}, args.items()[0].as_bytes())));
  };
  const PyValue read = unpickle(bytes, "round trip", back);
  EXPECT_EQ(read, value) << read.repr();
  EXPECT_TRUE(read.items()[3].is_newobj());
  EXPECT_FALSE(read.items()[2].is_newobj());
  EXPECT_THROW(pickle(PyValue::tensor(t)), std::invalid_argument);  // a tensor needs hooks
}

TEST(Pickle, MemoizesRepeatedGlobals) {
  std::vector<PyValue> dtypes(300, PyValue::global("torch", "bfloat16"));
  const std::string bytes = pickle(PyValue::list(dtypes));
  EXPECT_LT(bytes.size(), 40u + 300u * 3u);  // one GLOBAL, then 2-byte BINGETs and APPENDS
  EXPECT_EQ(unpickle(bytes, "memo"), PyValue::list(dtypes));
  // More than 256 distinct globals: LONG_BINPUT / LONG_BINGET.
  std::vector<PyValue> many;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 300; ++i) many.push_back(PyValue::global("m", "g" + std::to_string(i)));
  }
  EXPECT_EQ(unpickle(pickle(PyValue::list(many)), "long memo"), PyValue::list(many));
}

TEST(Pickle, ReadsCPythonAtEveryProtocol) {
  TempDir dir;
  for (int protocol = 0; protocol <= 5; ++protocol) {
    SCOPED_TRACE("protocol " + std::to_string(protocol));
    const std::string path = dir / ("p" + std::to_string(protocol) + ".pkl");
    const bool plain = protocol < 2;  // protocols 0 and 1 spell dataclasses with copyreg._reconstructor
    ASSERT_TRUE(reference_passes("pickle_reference.py", "dump " + std::to_string(protocol) + " '" + path + "'" + (plain ? " plain" : "")));
    const PyValue value = unpickle(read_bytes(path), path);
    EXPECT_EQ(value, sample_value(!plain)) << value.repr();
    const PyValue& shared = value.find("shared")->items()[0];
    EXPECT_EQ(shared.items().size(), 2u);  // memoized before its APPENDS: seen complete
  }
}

TEST(Pickle, ReadsSetsAsLists) {
  TempDir dir;
  for (int protocol : {2, 4}) {
    ASSERT_TRUE(reference_passes("pickle_reference.py", "dump-sets " + std::to_string(protocol) + " '" + (dir / "s.pkl") + "'"));
    const PyValue v = unpickle(read_bytes(dir / "s.pkl"), "sets");
    EXPECT_EQ(*v.find("set"), PyValue::list({num(3)}));
    EXPECT_EQ(*v.find("frozen"), PyValue::list({num(4)}));
    EXPECT_EQ(*v.find("empty"), PyValue::list({}));
  }
}

TEST(Pickle, CPythonReadsOurs) {
  TempDir dir;
  write_bytes(dir / "ours.pkl", pickle(sample_value(true)));
  reference_passes("pickle_reference.py", "check '" + (dir / "ours.pkl") + "'");
}

TEST(Pickle, AccessorsNameWhatTheyGot) {
  const PyValue d = PyValue::dict({{str("a"), num(1)}});
  EXPECT_EQ(error_of([&] { d.items(); }), "expected a tuple or list, got dict {'a': 1}");
  EXPECT_EQ(error_of([&] { d.find("a")->as_string(); }), "expected str, got int 1");
  EXPECT_EQ(d.find("b"), nullptr);
  EXPECT_EQ(num(3).as_float(), 3.0);
  EXPECT_EQ(PyValue::boolean(true).as_int(), 1);
  const PyValue obj = PyValue::object(PyValue::global("torch", "Size"), PyValue::tuple({PyValue::tuple({num(4)})}));
  EXPECT_TRUE(obj.is_global("torch", "Size"));
  EXPECT_EQ(obj.module(), "torch");
  EXPECT_EQ(obj.repr(), "torch.Size((4,))");
  EXPECT_EQ(PyValue::real(0.1).repr(), "0.1");
  EXPECT_EQ(PyValue::real(1e300).repr(), "1e+300");
  EXPECT_EQ(PyValue::real(2).repr(), "2.0");
  EXPECT_EQ(PyValue::bytes("a\x01").repr(), "b'a\\x01'");
}

TEST(Pickle, RejectsBadInput) {
  const std::string good = pickle(sample_value(true));
  // Every truncation fails with the file name and a byte offset, never a crash.
  for (size_t cut = 0; cut < good.size(); cut += 97) {
    const std::string message = error_of<std::runtime_error>([&] { unpickle(good.substr(0, cut), "x.pkl"); });
    EXPECT_EQ(message.rfind("x.pkl: pickle: ", 0), 0u) << cut << ": " << message;
    EXPECT_NE(message.find(" at byte "), std::string::npos) << message;
  }
  EXPECT_EQ(error_of([] { unpickle("\x80\x02\xff", "g"); }), "g: pickle: unknown opcode 0xff at byte 2");
  EXPECT_EQ(error_of([] { unpickle("\x80\x06N.", "g"); }), "g: pickle: unsupported pickle protocol 6 at byte 0");
  EXPECT_EQ(error_of([] { unpickle("\x80\x02h\x05.", "g"); }), "g: pickle: memo key 5 was never stored at byte 2");
  EXPECT_EQ(error_of([] { unpickle(raw("\x80\x02N\x85q\x00\x81."), "g"); }), "g: pickle: stack underflow at byte 6");
  EXPECT_EQ(error_of([] {
              unpickle(raw("\x80\x02X\x01\x00\x00\x00"
                           "aQ."),
                       "g");
            }),
            "g: pickle: persistent id 'a' but no persistent_load at byte 8");
  // 2**64 (LONG1 of 9 bytes) does not fit; -2**63 does.
  EXPECT_EQ(error_of([] { unpickle(raw("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."), "g"); }),
            "g: pickle: integer does not fit in 64 bits at byte 2");
  EXPECT_EQ(unpickle(raw("\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."), "g").as_int(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(error_of([] { unpickle("I18446744073709551616\n.", "g"); }),
            "g: pickle: integer does not fit in 64 bits at byte 0");
  // A list containing itself (through the memo), and nesting past 1000.
  EXPECT_EQ(error_of([] {
              unpickle(raw("\x80\x02]q\x00h\x00"
                           "a."),
                       "g");
            }),
            "g: pickle: recursive structure (a value containing itself) is not supported at byte 8");
  EXPECT_EQ(error_of([] { unpickle("\x80\x02" + std::string(2000, ']') + std::string(1999, 'a') + ".", "g"); }),
            "g: pickle: value nested deeper than 1000 at byte 4001");
  EXPECT_EQ(unpickle("\x80\x02" + std::string(900, ']') + std::string(899, 'a') + ".", "g").kind(), Kind::kList);
}
