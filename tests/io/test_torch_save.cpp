// io/serialization/torch_save: our bytes read by PyTorch's torch.load (Debian's python3-torch), files
// written by PyTorch's torch.save read by ours (views, offsets, shared storages), the zip
// layout (alignment, determinism, zip64, deflate), and corrupt or foreign files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "io/serialization/torch_save.h"
#include "io/serialization/zip_archive.h"
#include "tests/io/io_test_util.h"

using megacpp::io::serialization::DType;
using megacpp::io::serialization::dtype_from_torch_name;
using megacpp::io::serialization::dtype_size;
using megacpp::io::serialization::dtype_torch_name;
using megacpp::io::serialization::pickle;
using megacpp::io::serialization::PyValue;
using megacpp::io::serialization::RawTensor;
using megacpp::io::serialization::torch_load;
using megacpp::io::serialization::torch_save;
using megacpp::io::serialization::write_zip;
using megacpp::io::serialization::ZipReader;
using megacpp::io::serialization::ZipRecord;
using megacpp::io_test::error_of;
using megacpp::io_test::read_bytes;
using megacpp::io_test::reference_passes;
using megacpp::io_test::run_command;
using megacpp::io_test::TempDir;
using megacpp::io_test::write_bytes;

namespace {

const DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64,
                            DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUInt8,    DType::kBool};

template <typename T>
void append(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

uint16_t half_bits(double v) {  // exact for the small multiples of 0.5 used here
  if (v == 0) return 0;
  int e;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const auto mantissa = static_cast<uint16_t>((m * 2 - 1) * 1024);
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) | mantissa);
}

// torch_reference.py's values(dtype, shape), as raw bytes.
std::string values(DType dtype, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % 7 - 3;
    const double f = static_cast<double>(k) * 0.5;
    switch (dtype) {
      case DType::kFloat32: append(out, static_cast<float>(f)); break;
      case DType::kFloat64: append(out, f); break;
      case DType::kFloat16: append(out, half_bits(f)); break;
      case DType::kBFloat16: {
        const auto x = static_cast<float>(f);
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        append(out, static_cast<uint16_t>(bits >> 16));
        break;
      }
      case DType::kInt64: append(out, k); break;
      case DType::kInt32: append(out, static_cast<int32_t>(k)); break;
      case DType::kInt16: append(out, static_cast<int16_t>(k)); break;
      case DType::kInt8: append(out, static_cast<int8_t>(k)); break;
      case DType::kUInt8: append(out, static_cast<uint8_t>(i % 7)); break;
      case DType::kBool: append(out, static_cast<uint8_t>(i % 3 == 0)); break;
    }
  }
  return out;
}

PyValue tensor(RawTensor t) { return PyValue::tensor(std::make_shared<RawTensor>(std::move(t))); }
std::string floats(std::initializer_list<float> v) {
  std::string out;
  for (float f : v) append(out, f);
  return out;
}

std::string doubles(std::initializer_list<double> v) {
  std::string out;
  for (double f : v) append(out, f);
  return out;
}

std::vector<std::pair<PyValue, PyValue>> dtype_items() {
  std::vector<std::pair<PyValue, PyValue>> items;
  for (DType d : kAllDTypes)
    items.emplace_back(PyValue::string(dtype_torch_name(d)), tensor(RawTensor::contiguous(d, {2, 3}, values(d, 6))));
  return items;
}

// torch_reference.py's megacpp_sample().
PyValue megacpp_sample() {
  auto items = dtype_items();
  std::string arange20;
  for (int i = 0; i < 20; ++i) append(arange20, static_cast<float>(i));
  RawTensor view = RawTensor::contiguous(DType::kFloat32, {20}, arange20);
  view.sizes = {4, 2};
  view.strides = {5, 1};
  view.storage_offset = 1;
  std::string arange6;
  for (int32_t i = 0; i < 6; ++i) append(arange6, i);
  RawTensor shared_a = RawTensor::contiguous(DType::kInt32, {6}, arange6), shared_b = shared_a;
  shared_a.sizes = {3};
  shared_b.sizes = {4};
  shared_b.storage_offset = 2;
  RawTensor grad = RawTensor::contiguous(DType::kFloat32, {2}, floats({1, 1}));
  grad.requires_grad = true;
  items.insert(items.end(), {
                                {PyValue::string("scalar"), tensor(RawTensor::contiguous(DType::kFloat64, {}, doubles({2.5})))},
                                {PyValue::string("empty"), tensor(RawTensor::contiguous(DType::kFloat32, {0, 3}, ""))},
                                {PyValue::string("view"), tensor(view)},
                                {PyValue::string("shared_a"), tensor(shared_a)},
                                {PyValue::string("shared_b"), tensor(shared_b)},
                                {PyValue::string("requires_grad"), tensor(grad)},
                                {PyValue::string("nested"),
                                 PyValue::dict({{PyValue::string("list"), PyValue::list({tensor(RawTensor::contiguous(
                                                                  DType::kInt64, {4}, values(DType::kInt64, 4)))})}})},
                                {PyValue::string("lr"), PyValue::real(0.001)},
                                {PyValue::string("tuple"), PyValue::tuple({PyValue::integer(1), PyValue::string("two"), PyValue::real(3.0)})},
                                {PyValue::string("text"), PyValue::string("h\xc3\xa9llo")},
                                {PyValue::string("bytes"), PyValue::bytes(std::string("\x00\xff", 2))},
                                {PyValue::string("none"), PyValue::none()},
                            });
  return PyValue::dict(std::move(items));
}

const RawTensor& tensor_at(const PyValue& dict, const std::string& key) {
  const PyValue* v = dict.find(key);
  if (!v) throw std::runtime_error("no key " + key);
  return v->tensor();
}

}  // namespace

TEST(TorchSave, DTypeNames) {
  for (DType d : kAllDTypes) EXPECT_EQ(dtype_from_torch_name(dtype_torch_name(d)), d);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_THROW(dtype_from_torch_name("complex64"), std::invalid_argument);
}

TEST(TorchSave, PyTorchLoadsOurs) {
  TempDir dir;
  write_bytes(dir / "ours.pt", torch_save(megacpp_sample()));
  reference_passes("torch_reference.py", "check '" + (dir / "ours.pt") + "'");
  // The restricted unpickler PyTorch 2.x's DCP loads chunks with.
  write_bytes(dir / "weights.pt", torch_save(PyValue::dict(dtype_items())));
  reference_passes("torch_reference.py", "check-weights-only '" + (dir / "weights.pt") + "'");
  // torch.save(0.001) style: a plain value, no storages.
  write_bytes(dir / "lr.pt", torch_save(PyValue::real(0.001)));
  const auto r =
      run_command(megacpp::io_test::kDebianPython + " -c \"import torch; assert torch.load('" + (dir / "lr.pt") + "') == 0.001\"");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(TorchSave, RoundTripsAndSharesStorages) {
  const PyValue sample = megacpp_sample();
  const std::string bytes = torch_save(sample);
  EXPECT_EQ(torch_save(sample), bytes);  // deterministic
  const PyValue back = torch_load(bytes, "ours.pt");
  EXPECT_EQ(back, sample) << back.repr();
  EXPECT_EQ(tensor_at(back, "shared_a").storage, tensor_at(back, "shared_b").storage);
  EXPECT_EQ(tensor_at(back, "view").strides, (std::vector<int64_t>{5, 1}));
  EXPECT_TRUE(tensor_at(back, "requires_grad").requires_grad);

  // PyTorch 2.x's records, each record's data 64-byte aligned.
  ZipReader zip(bytes, "ours.pt");
  const std::vector<std::string> expected_first = {"archive/data.pkl", "archive/.format_version",
                                                   "archive/.storage_alignment", "archive/byteorder", "archive/data/0"};
  EXPECT_EQ(std::vector<std::string>(zip.names().begin(), zip.names().begin() + 5), expected_first);
  EXPECT_EQ(zip.names()[zip.names().size() - 2], "archive/version");
  EXPECT_EQ(zip.names().back(), "archive/.data/serialization_id");
  EXPECT_EQ(zip.read("archive/version"), "3\n");
  EXPECT_EQ(zip.read("archive/.data/serialization_id").size(), 40u);
  for (const auto& name : zip.names()) EXPECT_EQ(zip.data_offset(name) % 64, 0u) << name;
  // 10 dtypes + scalar, empty, view, shared_a/b (once), requires_grad, nested: 16 storages.
  EXPECT_TRUE(zip.contains("archive/data/15"));
  EXPECT_FALSE(zip.contains("archive/data/16"));
}

TEST(TorchSave, ReadsPyTorchSave) {
  TempDir dir;
  ASSERT_TRUE(reference_passes("torch_reference.py", "write '" + (dir / "py.pt") + "'"));
  const std::string bytes = read_bytes(dir / "py.pt");
  const PyValue v = torch_load(bytes, "py.pt");
  for (DType d : kAllDTypes) {
    const RawTensor& t = tensor_at(v, dtype_torch_name(d));
    EXPECT_EQ(t.dtype, d);
    EXPECT_EQ(t.sizes, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t.contiguous_bytes(), values(d, 6)) << dtype_torch_name(d);
  }
  const RawTensor& scalar = tensor_at(v, "scalar");
  EXPECT_TRUE(scalar.sizes.empty());
  EXPECT_EQ(scalar.contiguous_bytes(), doubles({2.5}));
  EXPECT_EQ(tensor_at(v, "empty").sizes, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(tensor_at(v, "empty").contiguous_bytes(), "");

  const RawTensor& view = tensor_at(v, "view");
  EXPECT_EQ(view.strides, (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(view.storage_offset, 1);
  EXPECT_EQ(view.storage_numel(), 20);
  EXPECT_FALSE(view.is_contiguous());
  EXPECT_EQ(view.contiguous_bytes(), floats({1, 2, 6, 7, 11, 12, 16, 17}));
  const RawTensor& narrow = tensor_at(v, "narrow");
  EXPECT_EQ(narrow.storage_offset, 3);
  EXPECT_EQ(narrow.contiguous_bytes(), floats({3, 4, 5, 6}));
  EXPECT_EQ(tensor_at(v, "transposed").contiguous_bytes(), floats({0, 3, 1, 4, 2, 5}));

  const RawTensor& a = tensor_at(v, "shared_a");
  const RawTensor& b = tensor_at(v, "shared_b");
  EXPECT_EQ(a.storage, b.storage);
  EXPECT_EQ(b.storage_offset, 2);
  EXPECT_EQ(b.contiguous_bytes().size(), 16u);

  EXPECT_TRUE(tensor_at(v, "param").requires_grad);
  const PyValue& state_dict = *v.find("state_dict");  // OrderedDict (+ _metadata): a dict
  EXPECT_EQ(tensor_at(state_dict, "weight").contiguous_bytes(), floats({0, 1, 2, 3}));
  EXPECT_EQ(tensor_at(state_dict, "bias").contiguous_bytes(), floats({0.5, -0.5}));
  EXPECT_EQ(v.find("lr")->as_float(), 0.001);
  EXPECT_EQ(*v.find("tuple"), PyValue::tuple({PyValue::integer(1), PyValue::string("two"), PyValue::real(3.0)}));
  EXPECT_EQ(v.find("text")->as_string(), "h\xc3\xa9llo");
  EXPECT_TRUE(v.find("none")->is_none());

  // The same archive with every record deflated (other zip writers may compress).
  ASSERT_TRUE(reference_passes("torch_reference.py", "deflate '" + (dir / "py.pt") + "' '" + (dir / "deflated.pt") + "'"));
  EXPECT_EQ(torch_load(read_bytes(dir / "deflated.pt"), "deflated.pt"), v);
}

TEST(TorchSave, Zip64RecordsReadEverywhere) {
  // Records past 4 GiB get zip64 sizes and offsets; force them on a small archive.
  const std::string plain = torch_save(megacpp_sample());
  ZipReader zip(plain, "ours.pt");
  std::vector<std::string> data;
  for (const auto& name : zip.names()) data.push_back(zip.read(name));
  std::vector<ZipRecord> records;
  for (size_t i = 0; i < data.size(); ++i) records.push_back({zip.names()[i], data[i]});
  TempDir dir;
  write_bytes(dir / "zip64.pt", write_zip(records, 64, /*force_zip64=*/true));
  const std::string bytes = read_bytes(dir / "zip64.pt");
  EXPECT_EQ(torch_load(bytes, "zip64.pt"), megacpp_sample());
  ZipReader zip64(bytes, "zip64.pt");
  for (const auto& name : zip64.names()) EXPECT_EQ(zip64.data_offset(name) % 64, 0u) << name;
  reference_passes("torch_reference.py", "load '" + (dir / "zip64.pt") + "'");
}

TEST(TorchSave, CorruptFilesNameWhatAndWhere) {
  const std::string what = "model/__1_0.distcp, key 'w'";
  std::string bytes = torch_save(
      PyValue::dict({{PyValue::string("w"), tensor(RawTensor::contiguous(DType::kFloat32, {4}, floats({1, 2, 3, 4})))}}));
  const uint64_t data = ZipReader(bytes, what).data_offset("archive/data/0");

  std::string flipped = bytes;
  flipped[data + 5] ^= 0x10;
  const std::string crc = error_of([&] { torch_load(flipped, what); });
  EXPECT_EQ(crc.rfind(what + ": record 'archive/data/0' is corrupted: its CRC-32 is 0x", 0), 0u) << crc;

  for (size_t cut :
       {size_t{0}, size_t{3}, size_t{100}, static_cast<size_t>(data + 2), bytes.size() - 30, bytes.size() - 1}) {
    const std::string message =
        error_of<std::runtime_error>([&] { torch_load(std::string_view(bytes).substr(0, cut), what); });
    EXPECT_EQ(message.rfind(what + ": ", 0), 0u) << cut << ": " << message;
  }
  EXPECT_EQ(error_of([&] { torch_load("hello world", what); }),
            what + ": not a zip archive (torch.save files start with \"PK\\x03\\x04\")");
  EXPECT_EQ(error_of([&] { torch_load(std::string("\x80\x02\x8a\x0a", 4), what); }),
            what + ": a legacy (PyTorch < 1.6, non-zip) torch.save file, which is not supported");

  // A CRC of 0 means "not computed" (torch.serialization.set_crc32_options(False)): loads.
  std::string no_crc = bytes;
  for (size_t p = 0; (p = no_crc.find("archive/data/0", p)) != std::string::npos; ++p) {
    const bool local = no_crc.compare(p - 30, 4, "PK\x03\x04") == 0;
    no_crc.replace(p - (local ? 16 : 30), 4, std::string(4, '\0'));
  }
  EXPECT_EQ(tensor_at(torch_load(no_crc, what), "w").contiguous_bytes(), floats({1, 2, 3, 4}));
  no_crc[data + 5] ^= 0x10;  // and then nothing can be checked
  EXPECT_NE(tensor_at(torch_load(no_crc, what), "w").contiguous_bytes(), floats({1, 2, 3, 4}));

  // A missing storage record: rename data/0 (same length) in both headers.
  std::string renamed = bytes;
  for (size_t p = 0; (p = renamed.find("archive/data/0", p)) != std::string::npos; ++p) renamed[p + 13] = '9';
  EXPECT_EQ(error_of([&] { torch_load(renamed, what); }), what + ": missing record 'archive/data/0'");
}

TEST(TorchSave, BadPicklesNameWhat) {
  const std::string what = "x.distcp, key 'k'";
  // data.pkl = _rebuild_tensor_v2(persistent_load(('storage', torch.<storage_class>, '0',
  // 'cpu', numel)), 0, size, (1,), False, None) over the storage bytes `storage`.
  auto load = [&](const std::string& storage_class, int64_t numel, int64_t size, const std::string& storage) {
    const PyValue pid = PyValue::tuple(
        {PyValue::string("storage"), PyValue::global("torch", storage_class), PyValue::string("0"), PyValue::string("cpu"), PyValue::integer(numel)});
    const PyValue marker = PyValue::global("test", "storage");
    megacpp::io::serialization::PickleHooks hooks;
    hooks.persistent_id = [&](const PyValue& v) -> std::optional<PyValue> {
      if (v.is_global("test", "storage")) return pid;
      return std::nullopt;
    };
    const std::string pkl =
        pickle(PyValue::object(
                   PyValue::global("torch._utils", "_rebuild_tensor_v2"),
                   PyValue::tuple({marker, PyValue::integer(0), PyValue::tuple({PyValue::integer(size)}),
                                   PyValue::tuple({PyValue::integer(1)}), PyValue::boolean(false), PyValue::none()})),
               hooks);
    return error_of([&] {
      torch_load(write_zip({{"archive/data.pkl", pkl}, {"archive/data/0", storage}, {"archive/version", "3\n"}}), what);
    });
  };
  EXPECT_EQ(load("FloatStorage", 2, 2, floats({1, 2})), "");
  EXPECT_EQ(load("ComplexFloatStorage", 1, 1, floats({1, 2})),
            what + ": unsupported storage type torch.ComplexFloatStorage");
  EXPECT_EQ(load("FloatStorage", 3, 3, floats({1, 2})),
            what + ": record 'archive/data/0' holds 8 bytes, but the pickle says 3 elements of float32");
  EXPECT_EQ(load("FloatStorage", 2, 3, floats({1, 2})),
            what + ": tensor view (offset 0, reaching element 2) lies outside its storage of 2 elements");
}
