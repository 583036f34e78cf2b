// tests/reference/dcp_reader.py (the independent Python reader of Distributed Checkpoint
// directories) on a directory laid out as PyTorch 2.x writes one (dcp_fake_writer.py), and our
// unpickle/torch_load on the same files: the protocol-4 `.metadata` and every stored item.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/serialization/pickle.h"
#include "io/serialization/torch_save.h"
#include "tests/io/io_test_util.h"

using megacpp::io::serialization::dtype_size;
using megacpp::io::serialization::PyValue;
using megacpp::io::serialization::RawTensor;
using megacpp::io::serialization::torch_load;
using megacpp::io::serialization::unpickle;
using megacpp::io_test::read_bytes;
using megacpp::io_test::run_command;
using megacpp::io_test::TempDir;

namespace {

const std::string kPython = megacpp::io_test::reference_script("");
const std::string kMetadata = "torch.distributed.checkpoint.metadata";

std::string run(const std::string& command) {
  const auto r = run_command(kPython + command);
  EXPECT_EQ(r.status, 0) << command << ":\n" << r.output;
  return r.output;
}

// A dataclass field (its BUILD state is a dict).
const PyValue& field(const PyValue& obj, const std::string& name) {
  const PyValue* v = obj.state().find(name);
  if (!v) throw std::runtime_error("no field " + name + " in " + obj.repr());
  return *v;
}

std::vector<int64_t> torch_size(const PyValue& size) {
  EXPECT_TRUE(size.is_global("torch", "Size")) << size.repr();
  std::vector<int64_t> out;
  for (const auto& d : size.args().items()[0].items()) out.push_back(d.as_int());
  return out;
}

// The block [offsets, offsets + sizes) of a C-contiguous tensor, as bytes in C order.
std::string block(const RawTensor& full, const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  const std::string bytes = full.contiguous_bytes();
  const size_t es = dtype_size(full.dtype);
  std::string out;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, flat = 0, stride = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      flat += (offsets[d] + rest % sizes[d]) * stride;
      rest /= sizes[d];
      stride *= full.sizes[d];
    }
    out += bytes.substr(static_cast<size_t>(flat) * es, es);
  }
  return out;
}

}  // namespace

TEST(DcpReader, ReadsADirectoryAsPyTorchWritesIt) {
  TempDir dir;
  const std::string ckpt = dir / "ckpt", out = dir / "out.pt";
  run("dcp_fake_writer.py write '" + ckpt + "'");
  const std::string listing = run("dcp_reader.py '" + ckpt + "' --out '" + out + "'");
  EXPECT_EQ(listing,
            "model.w float32 [4, 3]\nmodel.w2 bfloat16 [4, 4]\nmodel.b float16 [5]\nmodel.col float32 [3, 4]\n"
            "model.scalar int64 []\noptim.step bytes 12\noptim.extra bytes {'lr': 0.001, 'betas': (0.9, 0.95)}\n");
  run("dcp_fake_writer.py check '" + out + "'");

  // Our side: the same .metadata (protocol 4: FRAME, STACK_GLOBAL, MEMOIZE; Python >= 3.11
  // pickles enum members as getattr(cls, name)) and every item through torch_load.
  const PyValue full = torch_load(read_bytes(out), out);
  const PyValue md = unpickle(read_bytes(ckpt + "/.metadata"), ckpt + "/.metadata");
  ASSERT_TRUE(md.is_global(kMetadata, "Metadata")) << md.repr();
  EXPECT_EQ(field(md, "version").as_string(), "1.0.0");
  const PyValue& w = *field(md, "state_dict_metadata").find("model.w");
  const PyValue& properties = field(w, "properties").state();  // TensorProperties.__getstate__ tuple
  ASSERT_GE(properties.items().size(), 5u) << properties.repr();
  EXPECT_TRUE(properties.items()[0].is_global("torch", "float32"));
  EXPECT_EQ(torch_size(field(w, "size")), (std::vector<int64_t>{4, 3}));

  size_t tensors = 0, objects = 0;
  for (const auto& [index, info] : field(md, "storage_data").dict_items()) {
    ASSERT_TRUE(index.is_global(kMetadata, "MetadataIndex")) << index.repr();
    const std::string key = field(index, "fqn").as_string();
    const std::string file = read_bytes(ckpt + "/" + field(info, "relative_path").as_string());
    const auto offset = static_cast<size_t>(field(info, "offset").as_int());
    const auto length = static_cast<size_t>(field(info, "length").as_int());
    ASSERT_LE(offset + length, file.size());
    const PyValue item = torch_load(std::string_view(file).substr(offset, length), key);
    const PyValue& expected = *full.find(key);
    if (expected.kind() != PyValue::Kind::kTensor) {
      EXPECT_EQ(item, expected) << key;
      ++objects;
      continue;
    }
    const std::vector<int64_t> offsets = torch_size(field(index, "offset"));
    EXPECT_EQ(item.tensor().dtype, expected.tensor().dtype) << key;
    EXPECT_EQ(item.tensor().contiguous_bytes(), block(expected.tensor(), offsets, item.tensor().sizes)) << key;
    ++tensors;
  }
  EXPECT_EQ(tensors, 2u + 4u + 1u + 1u + 1u);
  EXPECT_EQ(objects, 2u);
}
