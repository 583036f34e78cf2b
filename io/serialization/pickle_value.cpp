// PyValue: the Python value model of io/serialization/pickle.h (factories, checked accessors,
// repr, equality).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "io/serialization/pickle.h"
#include "io/serialization/torch_save.h"

namespace megacpp::io::serialization {

struct PyValue::Node {
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;            // string, bytes; a global's module
  std::string name;            // a global's name
  std::vector<PyValue> items;  // tuple, list; object: {callable, args, state}
  std::vector<std::pair<PyValue, PyValue>> dict;
  std::shared_ptr<const RawTensor> tensor;
  bool newobj = false;
};

namespace {

const char* kind_name(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kNone: return "None";
    case PyValue::Kind::kBool: return "bool";
    case PyValue::Kind::kInt: return "int";
    case PyValue::Kind::kFloat: return "float";
    case PyValue::Kind::kString: return "str";
    case PyValue::Kind::kBytes: return "bytes";
    case PyValue::Kind::kTuple: return "tuple";
    case PyValue::Kind::kList: return "list";
    case PyValue::Kind::kDict: return "dict";
    case PyValue::Kind::kGlobal: return "global";
    case PyValue::Kind::kObject: return "object";
    case PyValue::Kind::kTensor: return "tensor";
  }
  return "?";
}

std::shared_ptr<PyValue::Node> make(PyValue::Kind kind) {
  auto node = std::make_shared<PyValue::Node>();
  node->kind = kind;
  return node;
}

// Python's repr of a float: the shortest text that reads back to the same double.
std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s, bool bytes) {
  std::string out = bytes ? "b'" : "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

// Appends repr(v) to `out`, giving up (with "...") past `limit` characters or depth 16.
void repr_into(const PyValue& v, std::string& out, size_t limit, int depth) {
  if (out.size() > limit || depth > 16) {
    out += "...";
    return;
  }
  auto sequence = [&](const std::vector<PyValue>& items, const char* open, const char* close, bool tuple) {
    out += open;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ", ";
      if (i == 8 || out.size() > limit) {
        out += "...";
        break;
      }
      repr_into(items[i], out, limit, depth + 1);
    }
    if (tuple && items.size() == 1) out += ",";
    out += close;
  };
  switch (v.kind()) {
    case PyValue::Kind::kNone: out += "None"; break;
    case PyValue::Kind::kBool: out += v.as_bool() ? "True" : "False"; break;
    case PyValue::Kind::kInt: out += std::to_string(v.as_int()); break;
    case PyValue::Kind::kFloat: out += float_repr(v.as_float()); break;
    case PyValue::Kind::kString: out += quote(v.as_string().substr(0, limit), false); break;
    case PyValue::Kind::kBytes: out += quote(v.as_bytes().substr(0, limit), true); break;
    case PyValue::Kind::kTuple: sequence(v.items(), "(", ")", true); break;
    case PyValue::Kind::kList: sequence(v.items(), "[", "]", false); break;
    case PyValue::Kind::kDict: {
      out += "{";
      const auto& items = v.dict_items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        if (i == 8 || out.size() > limit) {
          out += "...";
          break;
        }
        repr_into(items[i].first, out, limit, depth + 1);
        out += ": ";
        repr_into(items[i].second, out, limit, depth + 1);
      }
      out += "}";
      break;
    }
    case PyValue::Kind::kGlobal: out += v.module() + "." + v.name(); break;
    case PyValue::Kind::kObject: {
      repr_into(v.callable(), out, limit, depth + 1);
      const PyValue& args = v.args();
      if (args.kind() == PyValue::Kind::kTuple) {
        sequence(args.items(), "(", ")", false);
      } else {
        repr_into(args, out, limit, depth + 1);
      }
      if (!v.state().is_none()) {
        out += " state=";
        repr_into(v.state(), out, limit, depth + 1);
      }
      break;
    }
    case PyValue::Kind::kTensor: {
      const RawTensor& t = v.tensor();
      out += "tensor(" + dtype_torch_name(t.dtype) + ", [";
      for (size_t i = 0; i < t.sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(t.sizes[i]);
      out += "])";
      break;
    }
  }
}

}  // namespace

PyValue::PyValue() = default;

const PyValue::Node& PyValue::node() const {
  static const Node none_node;
  return node_ ? *node_ : none_node;
}

PyValue PyValue::none() { return PyValue(); }

PyValue PyValue::boolean(bool value) {
  auto n = make(Kind::kBool);
  n->boolean = value;
  return PyValue(n);
}

PyValue PyValue::integer(int64_t value) {
  auto n = make(Kind::kInt);
  n->integer = value;
  return PyValue(n);
}

PyValue PyValue::real(double value) {
  auto n = make(Kind::kFloat);
  n->real = value;
  return PyValue(n);
}

PyValue PyValue::string(std::string utf8) {
  auto n = make(Kind::kString);
  n->text = std::move(utf8);
  return PyValue(n);
}

PyValue PyValue::bytes(std::string data) {
  auto n = make(Kind::kBytes);
  n->text = std::move(data);
  return PyValue(n);
}

PyValue PyValue::tuple(std::vector<PyValue> items) {
  auto n = make(Kind::kTuple);
  n->items = std::move(items);
  return PyValue(n);
}

PyValue PyValue::list(std::vector<PyValue> items) {
  auto n = make(Kind::kList);
  n->items = std::move(items);
  return PyValue(n);
}

PyValue PyValue::dict(std::vector<std::pair<PyValue, PyValue>> items) {
  auto n = make(Kind::kDict);
  n->dict = std::move(items);
  return PyValue(n);
}

PyValue PyValue::global(std::string module, std::string name) {
  auto n = make(Kind::kGlobal);
  n->text = std::move(module);
  n->name = std::move(name);
  return PyValue(n);
}

PyValue PyValue::object(PyValue callable, PyValue args, PyValue state, bool newobj) {
  auto n = make(Kind::kObject);
  n->items = {std::move(callable), std::move(args), std::move(state)};
  n->newobj = newobj;
  return PyValue(n);
}

PyValue PyValue::tensor(std::shared_ptr<const RawTensor> tensor) {
  if (!tensor) throw std::invalid_argument("PyValue::tensor: null tensor");
  auto n = make(Kind::kTensor);
  n->tensor = std::move(tensor);
  return PyValue(n);
}

PyValue::Kind PyValue::kind() const { return node().kind; }

namespace {
[[noreturn]] void wrong_kind(const char* expected, const PyValue& got) {
  throw std::runtime_error(std::string("expected ") + expected + ", got " + kind_name(got.kind()) + " " + got.repr());
}
}  // namespace

bool PyValue::as_bool() const {
  if (kind() != Kind::kBool) wrong_kind("bool", *this);
  return node().boolean;
}

int64_t PyValue::as_int() const {
  if (kind() == Kind::kBool) return node().boolean ? 1 : 0;
  if (kind() != Kind::kInt) wrong_kind("int", *this);
  return node().integer;
}

double PyValue::as_float() const {
  if (kind() == Kind::kInt) return static_cast<double>(node().integer);
  if (kind() != Kind::kFloat) wrong_kind("float", *this);
  return node().real;
}

const std::string& PyValue::as_string() const {
  if (kind() != Kind::kString) wrong_kind("str", *this);
  return node().text;
}

const std::string& PyValue::as_bytes() const {
  if (kind() != Kind::kBytes) wrong_kind("bytes", *this);
  return node().text;
}

const std::vector<PyValue>& PyValue::items() const {
  if (kind() != Kind::kTuple && kind() != Kind::kList) wrong_kind("a tuple or list", *this);
  return node().items;
}

const std::vector<std::pair<PyValue, PyValue>>& PyValue::dict_items() const {
  if (kind() != Kind::kDict) wrong_kind("dict", *this);
  return node().dict;
}

const PyValue* PyValue::find(const std::string& key) const {
  for (const auto& [k, v] : dict_items()) {
    if (k.kind() == Kind::kString && k.node().text == key) return &v;
  }
  return nullptr;
}

const std::string& PyValue::module() const {
  if (kind() == Kind::kObject) return callable().module();
  if (kind() != Kind::kGlobal) wrong_kind("a global", *this);
  return node().text;
}

const std::string& PyValue::name() const {
  if (kind() == Kind::kObject) return callable().name();
  if (kind() != Kind::kGlobal) wrong_kind("a global", *this);
  return node().name;
}

const PyValue& PyValue::callable() const {
  if (kind() != Kind::kObject) wrong_kind("object", *this);
  return node().items[0];
}

const PyValue& PyValue::args() const {
  if (kind() != Kind::kObject) wrong_kind("object", *this);
  return node().items[1];
}

const PyValue& PyValue::state() const {
  if (kind() != Kind::kObject) wrong_kind("object", *this);
  return node().items[2];
}

bool PyValue::is_newobj() const {
  if (kind() != Kind::kObject) wrong_kind("object", *this);
  return node().newobj;
}

const RawTensor& PyValue::tensor() const { return *tensor_ptr(); }

const std::shared_ptr<const RawTensor>& PyValue::tensor_ptr() const {
  if (kind() != Kind::kTensor) wrong_kind("tensor", *this);
  return node().tensor;
}

bool PyValue::is_global(std::string_view module, std::string_view name) const {
  if (kind() == Kind::kObject) return callable().is_global(module, name);
  return kind() == Kind::kGlobal && node().text == module && node().name == name;
}

std::string PyValue::repr() const {
  std::string out;
  repr_into(*this, out, 400, 0);
  return out;
}

void PyValue::append(PyValue item) { node_->items.push_back(std::move(item)); }

void PyValue::set_item(PyValue key, PyValue value) { node_->dict.emplace_back(std::move(key), std::move(value)); }

void PyValue::set_state(PyValue state) { node_->items[2] = std::move(state); }

bool operator==(const PyValue& a, const PyValue& b) {
  if (a.node_ == b.node_) return true;
  if (a.kind() != b.kind()) return false;
  const PyValue::Node& x = a.node();
  const PyValue::Node& y = b.node();
  switch (a.kind()) {
    case PyValue::Kind::kNone: return true;
    case PyValue::Kind::kBool: return x.boolean == y.boolean;
    case PyValue::Kind::kInt: return x.integer == y.integer;
    case PyValue::Kind::kFloat: return std::memcmp(&x.real, &y.real, sizeof(double)) == 0;
    case PyValue::Kind::kString:
    case PyValue::Kind::kBytes: return x.text == y.text;
    case PyValue::Kind::kTuple:
    case PyValue::Kind::kList: return x.items == y.items;
    case PyValue::Kind::kDict: return x.dict == y.dict;
    case PyValue::Kind::kGlobal: return x.text == y.text && x.name == y.name;
    case PyValue::Kind::kObject: return x.newobj == y.newobj && x.items == y.items;
    case PyValue::Kind::kTensor: {
      const RawTensor& s = *x.tensor;
      const RawTensor& t = *y.tensor;
      return s.dtype == t.dtype && s.sizes == t.sizes && s.requires_grad == t.requires_grad &&
             s.contiguous_bytes() == t.contiguous_bytes();
    }
  }
  return false;
}

}  // namespace megacpp::io::serialization
