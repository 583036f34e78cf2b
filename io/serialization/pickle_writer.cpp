// pickle(): protocol 2, spelled as CPython's Pickler spells each value (Lib/pickle.py) so
// that Python and PyTorch's weights_only unpickler (which knows only a subset of opcodes:
// no BINBYTES, SHORT_BINUNICODE, LONG4, MEMOIZE or STACK_GLOBAL) both read it.
#include <cstring>
#include <map>
#include <stdexcept>

#include "io/serialization/pickle.h"

namespace megacpp::io::serialization {
namespace {

constexpr int kMaxDepth = 1000;
constexpr size_t kBatch = 1000;  // pickle.Pickler._BATCHSIZE

class Pickler {
 public:
  explicit Pickler(const PickleHooks& hooks) : hooks_(hooks) {}

  std::string run(const PyValue& value) {
    out_ += "\x80\x02";  // PROTO 2
    write(value, 0);
    out_ += '.';  // STOP
    return std::move(out_);
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xFF);
  }

  void write_int(int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      out_ += 'K';  // BININT1
      le(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v <= 0xFFFF) {
      out_ += 'M';  // BININT2
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';  // BININT
      le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      // LONG1: minimal little-endian two's complement (pickle.encode_long).
      const auto u = static_cast<uint64_t>(v);
      int n = 8;
      while (n > 1) {
        const auto last = static_cast<uint8_t>(u >> (8 * (n - 1)));
        const bool next_negative = (u >> (8 * (n - 1) - 1)) & 1;
        if ((last == 0x00 && !next_negative) || (last == 0xFF && next_negative)) {
          --n;
        } else {
          break;
        }
      }
      out_ += '\x8a';
      out_ += static_cast<char>(n);
      le(u, n);
    }
  }

  void write_string(const std::string& s) {
    out_ += 'X';  // BINUNICODE
    le(s.size(), 4);
    out_ += s;
  }

  void write_global(const std::string& module, const std::string& name) {
    if (module.find('\n') != std::string::npos || name.find('\n') != std::string::npos) {
      throw std::invalid_argument("pickle: a global name has a newline: " + module + "." + name);
    }
    auto [it, inserted] = globals_.try_emplace({module, name}, static_cast<uint32_t>(globals_.size()));
    const uint32_t index = it->second;
    if (!inserted) {
      if (index < 256) {
        out_ += 'h';  // BINGET
        le(index, 1);
      } else {
        out_ += 'j';  // LONG_BINGET
        le(index, 4);
      }
      return;
    }
    out_ += 'c' + module + '\n' + name + '\n';  // GLOBAL
    if (index < 256) {
      out_ += 'q';  // BINPUT
      le(index, 1);
    } else {
      out_ += 'r';  // LONG_BINPUT
      le(index, 4);
    }
  }

  // MARK items OP in batches; a batch of one uses `single` instead.
  template <typename Item, typename WriteItem>
  void batched(const std::vector<Item>& items, char single, char many, WriteItem write_item) {
    for (size_t begin = 0; begin < items.size(); begin += kBatch) {
      const size_t end = std::min(items.size(), begin + kBatch);
      if (end - begin == 1) {
        write_item(items[begin]);
        out_ += single;
        continue;
      }
      out_ += '(';
      for (size_t i = begin; i < end; ++i) write_item(items[i]);
      out_ += many;
    }
  }

  void write(const PyValue& v, int depth) {
    if (depth > kMaxDepth) throw std::invalid_argument("pickle: value nested deeper than 1000 (a cycle?)");
    if (hooks_.persistent_id) {
      if (std::optional<PyValue> pid = hooks_.persistent_id(v)) {
        write(*pid, depth + 1);
        out_ += 'Q';  // BINPERSID
        return;
      }
    }
    switch (v.kind()) {
      case PyValue::Kind::kNone: out_ += 'N'; break;
      case PyValue::Kind::kBool: out_ += v.as_bool() ? '\x88' : '\x89'; break;
      case PyValue::Kind::kInt: write_int(v.as_int()); break;
      case PyValue::Kind::kFloat: {
        const double d = v.as_float();
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        out_ += 'G';  // BINFLOAT, big endian
        for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xFF);
        break;
      }
      case PyValue::Kind::kString: write_string(v.as_string()); break;
      case PyValue::Kind::kBytes: {
        // Protocol 2 has no bytes opcode: CPython writes _codecs.encode(b.decode('latin1'), 'latin1').
        std::string latin1;
        for (unsigned char c : v.as_bytes()) {
          if (c < 0x80) {
            latin1 += static_cast<char>(c);
          } else {
            latin1 += static_cast<char>(0xC0 | (c >> 6));
            latin1 += static_cast<char>(0x80 | (c & 0x3F));
          }
        }
        write_global("_codecs", "encode");
        write_string(latin1);
        write_string("latin1");
        out_ += "\x86R";  // TUPLE2 REDUCE
        break;
      }
      case PyValue::Kind::kTuple: {
        const auto& items = v.items();
        if (items.empty()) {
          out_ += ')';  // EMPTY_TUPLE
          break;
        }
        if (items.size() > 3) out_ += '(';
        for (const auto& item : items) write(item, depth + 1);
        out_ += items.size() == 1 ? '\x85' : items.size() == 2 ? '\x86' : items.size() == 3 ? '\x87' : 't';
        break;
      }
      case PyValue::Kind::kList:
        out_ += ']';  // EMPTY_LIST
        batched(v.items(), 'a', 'e', [&](const PyValue& item) { write(item, depth + 1); });
        break;
      case PyValue::Kind::kDict:
        out_ += '}';  // EMPTY_DICT
        batched(v.dict_items(), 's', 'u', [&](const std::pair<PyValue, PyValue>& kv) {
          write(kv.first, depth + 1);
          write(kv.second, depth + 1);
        });
        break;
      case PyValue::Kind::kGlobal: write_global(v.module(), v.name()); break;
      case PyValue::Kind::kObject: {
        const PyValue& callable = v.callable();
        if (callable.kind() == PyValue::Kind::kGlobal) {
          write_global(callable.module(), callable.name());
        } else {
          write(callable, depth + 1);
        }
        if (v.args().kind() != PyValue::Kind::kTuple) {
          throw std::invalid_argument("pickle: the arguments of " + v.repr() + " are not a tuple");
        }
        write(v.args(), depth + 1);
        out_ += v.is_newobj() ? '\x81' : 'R';  // NEWOBJ / REDUCE
        if (!v.state().is_none()) {
          write(v.state(), depth + 1);
          out_ += 'b';  // BUILD
        }
        break;
      }
      case PyValue::Kind::kTensor:
        if (!hooks_.reduce_tensor) {
          throw std::invalid_argument("pickle: cannot pickle " + v.repr() +
                                      " without a reduce_tensor hook (use torch_save)");
        }
        write(hooks_.reduce_tensor(v), depth + 1);
        break;
    }
  }

  const PickleHooks& hooks_;
  std::string out_;
  std::map<std::pair<std::string, std::string>, uint32_t> globals_;  // memo index of each global
};

}  // namespace

std::string pickle(const PyValue& value, const PickleHooks& hooks) { return Pickler(hooks).run(value); }

}  // namespace megacpp::io::serialization
