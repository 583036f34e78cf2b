// Torch-free Python pickle: a small model of Python values and a reader/writer for what
// PyTorch stores with pickle — a Distributed Checkpoint's `.metadata` (pickle.dump of
// dataclasses, Python's default protocol 4) and torch.save's `data.pkl` (protocol 2).
//
// Objects are never constructed: REDUCE/NEWOBJ give an object value (callable, args) and
// BUILD sets its state, the way `pickletools.dis` would describe them. Only the few built-ins
// that protocol 2 uses to spell plain data are decoded (see unpickle).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megacpp::io::serialization {

struct RawTensor;  // io/serialization/torch_save.h

// A Python value. Containers have reference semantics as in Python (copies share the
// node), so a memoized list that is appended to later is seen complete everywhere.
class PyValue {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kTuple, kList, kDict, kGlobal, kObject, kTensor };

  PyValue();  // None
  static PyValue none();
  static PyValue boolean(bool value);
  static PyValue integer(int64_t value);
  static PyValue real(double value);
  static PyValue string(std::string utf8);
  static PyValue bytes(std::string data);
  static PyValue tuple(std::vector<PyValue> items);
  static PyValue list(std::vector<PyValue> items);
  // Insertion-ordered; keys may be any value (frozen dataclass objects too).
  static PyValue dict(std::vector<std::pair<PyValue, PyValue>> items);
  // A module-level name, e.g. ("torch", "float32").
  static PyValue global(std::string module, std::string name);
  // An object made by calling `callable` (a global) with `args` (a tuple), then BUILD with
  // `state` when it is not None. `newobj`: made by NEWOBJ (cls.__new__(cls, *args), what
  // Python uses for dataclasses) rather than REDUCE (callable(*args)).
  static PyValue object(PyValue callable, PyValue args, PyValue state = none(), bool newobj = false);
  static PyValue tensor(std::shared_ptr<const RawTensor> tensor);

  Kind kind() const;
  bool is_none() const { return kind() == Kind::kNone; }

  // Checked accessors: throw std::runtime_error ("expected a tuple, got dict {...}").
  bool as_bool() const;
  int64_t as_int() const;   // also accepts a bool, as Python does
  double as_float() const;  // also accepts an int
  const std::string& as_string() const;
  const std::string& as_bytes() const;
  const std::vector<PyValue>& items() const;  // tuple or list
  const std::vector<std::pair<PyValue, PyValue>>& dict_items() const;
  // The value of string key `key` of a dict; null when absent. Throws when not a dict.
  const PyValue* find(const std::string& key) const;
  // A global's module and name, or those of an object's callable.
  const std::string& module() const;
  const std::string& name() const;
  const PyValue& callable() const;  // object
  const PyValue& args() const;      // object
  const PyValue& state() const;     // object; None when it had no BUILD
  bool is_newobj() const;           // object
  const RawTensor& tensor() const;
  const std::shared_ptr<const RawTensor>& tensor_ptr() const;

  // True for global module.name, and for an object whose callable is that global.
  bool is_global(std::string_view module, std::string_view name) const;
  // Short Python-like text for messages, e.g. "{'a': (1, 2.5)}"; long values are elided.
  std::string repr() const;

  // Deep structural equality (floats bitwise; tensors by dtype, sizes, requires_grad and
  // element values, whatever their strides).
  friend bool operator==(const PyValue& a, const PyValue& b);
  friend bool operator!=(const PyValue& a, const PyValue& b) { return !(a == b); }

  struct Node;

 private:
  explicit PyValue(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  const Node& node() const;
  // In-place updates for the unpickler (APPEND, SETITEM, BUILD act on memoized nodes).
  friend class Unpickler;
  void append(PyValue item);
  void set_item(PyValue key, PyValue value);
  void set_state(PyValue state);
  std::shared_ptr<Node> node_;  // null means None
};

struct UnpickleHooks {
  // BINPERSID/PERSID: the object that persistent id `pid` stands for. Without it, a
  // persistent id is an error.
  std::function<PyValue(const PyValue& pid)> persistent_load;
  // REDUCE/NEWOBJ: a value to use instead of the object callable(*args), or nullopt to
  // keep the object. A BUILD that follows a replaced value is dropped when the value is not
  // an object (e.g. an OrderedDict's attributes).
  std::function<std::optional<PyValue>(const PyValue& callable, const PyValue& args)> resolve_reduce;
};

// Reads a pickle of protocol 0..5 (the opcodes CPython and torch.save write; out-of-band
// buffers, the extension registry and protocol 0's STRING are refused). After
// `hooks.resolve_reduce`, these are decoded to plain values: _codecs.encode(s, 'latin1') and
// bytes()/bytearray(...) -> bytes (protocol 2's spelling of bytes), collections.OrderedDict(...)
// -> dict, set/frozenset(...) -> list (as EMPTY_SET/ADDITEMS/FROZENSET are). Python 3.11+
// pickles an Enum member as the object builtins.getattr(cls, 'NAME'); older Pythons as cls(value).
// Integers must fit in int64; values that contain themselves or nest deeper than 1000 are
// refused. Throws std::runtime_error "<what>: pickle: <problem> at byte <offset>" on truncated
// or bad input; exceptions from the hooks pass through unchanged.
PyValue unpickle(std::string_view bytes, const std::string& what, const UnpickleHooks& hooks = {});

struct PickleHooks {
  // Called for every value before it is written; a returned pid is written instead, as
  // `pid BINPERSID` (torch.save's storages).
  std::function<std::optional<PyValue>(const PyValue& value)> persistent_id;
  // Called for every tensor that persistent_id did not take: the value to write in its
  // place (torch.save's _rebuild_tensor_v2 call). Without it, a tensor is an error.
  std::function<PyValue(const PyValue& tensor)> reduce_tensor;
};

// Writes protocol 2 exactly as CPython spells each value (BININT1/BININT2/BININT/LONG1,
// BINFLOAT, BINUNICODE, bytes as _codecs.encode(s, 'latin1'), TUPLE1..3, APPENDS/SETITEMS
// in batches of 1000, GLOBAL + args + REDUCE or NEWOBJ, state + BUILD), using only opcodes
// that PyTorch's weights_only unpickler also reads. Globals are memoized (BINPUT/BINGET).
// Throws std::invalid_argument for a tensor without hooks, or nesting deeper than 1000.
std::string pickle(const PyValue& value, const PickleHooks& hooks = {});

}  // namespace megacpp::io::serialization
