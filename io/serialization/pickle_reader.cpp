// unpickle(): a stack machine over CPython's pickle opcodes (Lib/pickle.py, protocols 0-5)
// that builds PyValues instead of Python objects.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "io/serialization/pickle.h"
#include "io/serialization/text_encoding.h"

namespace megacpp::io::serialization {

namespace {

// The bytes b for which s == b.decode('latin1'), or nullopt when s has a code point > 255.
std::optional<std::string> latin1_bytes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
      const uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[++i]) & 0x3Fu);
      if (cp > 0xFF) return std::nullopt;
      out += static_cast<char>(cp);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

bool is_builtin(const PyValue& callable, std::string_view name) {
  return callable.is_global("builtins", name) || callable.is_global("__builtin__", name);
}

// The built-ins protocol 2 uses to spell plain data (see unpickle in pickle.h).
std::optional<PyValue> resolve_builtin(const PyValue& callable, const PyValue& args) {
  if (callable.kind() != PyValue::Kind::kGlobal) return std::nullopt;
  const auto& a = args.items();
  if (callable.is_global("_codecs", "encode") && a.size() == 2 && a[0].kind() == PyValue::Kind::kString &&
      a[1].kind() == PyValue::Kind::kString &&
      (a[1].as_string() == "latin1" || a[1].as_string() == "latin-1" || a[1].as_string() == "iso-8859-1")) {
    if (auto b = latin1_bytes(a[0].as_string())) return PyValue::bytes(std::move(*b));
    return std::nullopt;
  }
  if (is_builtin(callable, "bytes") || is_builtin(callable, "bytearray")) {
    if (a.empty()) return PyValue::bytes("");
    if (a.size() == 1 && a[0].kind() == PyValue::Kind::kBytes) return PyValue::bytes(a[0].as_bytes());
    if (a.size() == 2 && a[0].kind() == PyValue::Kind::kString) {
      if (auto b = latin1_bytes(a[0].as_string())) return PyValue::bytes(std::move(*b));
    }
    return std::nullopt;
  }
  if (callable.is_global("collections", "OrderedDict")) {
    if (a.empty()) return PyValue::dict({});
    if (a.size() == 1 && (a[0].kind() == PyValue::Kind::kList || a[0].kind() == PyValue::Kind::kTuple)) {
      std::vector<std::pair<PyValue, PyValue>> items;
      for (const auto& pair : a[0].items()) {
        if (pair.kind() != PyValue::Kind::kTuple || pair.items().size() != 2) return std::nullopt;
        items.emplace_back(pair.items()[0], pair.items()[1]);
      }
      return PyValue::dict(std::move(items));
    }
    return std::nullopt;
  }
  if (is_builtin(callable, "set") || is_builtin(callable, "frozenset")) {
    if (a.empty()) return PyValue::list({});
    if (a.size() == 1 && (a[0].kind() == PyValue::Kind::kList || a[0].kind() == PyValue::Kind::kTuple)) {
      return PyValue::list(a[0].items());
    }
  }
  return std::nullopt;
}

}  // namespace

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& what, const UnpickleHooks& hooks)
      : data_(data), what_(what), hooks_(hooks) {}

  PyValue run() {
    while (true) {
      op_pos_ = pos_;
      const uint8_t op = u8();
      if (op == '.') {  // STOP
        if (stack_.empty()) fail("STOP with an empty stack");
        check_shape(stack_.back());
        return stack_.back();
      }
      step(op);
    }
  }

 private:
  static constexpr size_t kMaxDepth = 1000;

  // Refuses values that contain themselves (possible through the memo, never written by
  // PyTorch) or nest deeper than kMaxDepth, so that recursive code on PyValues (==, pickle)
  // always ends. An iterative depth-first walk; shared (memoized) nodes are walked once.
  void check_shape(const PyValue& root) const {
    auto children = [](const PyValue& v) {
      std::vector<const PyValue*> out;
      switch (v.kind()) {
        case PyValue::Kind::kTuple:
        case PyValue::Kind::kList:
          for (const auto& item : v.items()) out.push_back(&item);
          break;
        case PyValue::Kind::kDict:
          for (const auto& [k, item] : v.dict_items()) out.insert(out.end(), {&k, &item});
          break;
        case PyValue::Kind::kObject: out = {&v.callable(), &v.args(), &v.state()}; break;
        default: break;
      }
      return out;
    };
    struct Frame {
      const void* node;
      std::vector<const PyValue*> children;
      size_t next = 0;
    };
    std::vector<Frame> path;
    std::unordered_set<const void*> on_path, done;
    auto enter = [&](const PyValue& v) {
      const void* node = v.node_.get();
      if (!node || done.count(node)) return;
      if (on_path.count(node)) fail("recursive structure (a value containing itself) is not supported");
      if (path.size() >= kMaxDepth) fail("value nested deeper than " + std::to_string(kMaxDepth));
      on_path.insert(node);
      path.push_back({node, children(v)});
    };
    enter(root);
    while (!path.empty()) {
      Frame& top = path.back();
      if (top.next < top.children.size()) {
        const PyValue* child = top.children[top.next++];
        enter(*child);
      } else {
        on_path.erase(top.node);
        done.insert(top.node);
        path.pop_back();
      }
    }
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw std::runtime_error(what_ + ": pickle: " + problem + " at byte " + std::to_string(op_pos_));
  }

  const char* take(uint64_t n) {
    if (n > data_.size() - pos_) {
      fail("truncated data (" + std::to_string(n) + " bytes needed, " + std::to_string(data_.size() - pos_) + " left)");
    }
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint64_t le(int n) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  std::string_view line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("truncated data (no end of line)");
    std::string_view s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  void push(PyValue v) { stack_.push_back(std::move(v)); }
  PyValue pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
    PyValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PyValue& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
    return stack_.back();
  }
  std::vector<PyValue> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    std::vector<PyValue> items(std::make_move_iterator(stack_.begin() + marks_.back()),
                               std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  PyValue decode_long(const char* p, uint64_t n) {
    if (n == 0) return PyValue::integer(0);
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    const unsigned char sign = (b[n - 1] & 0x80) ? 0xFF : 0x00;
    for (uint64_t i = 8; i < n; ++i) {
      if (b[i] != sign) fail("integer does not fit in 64 bits");
    }
    if (n > 8 && ((b[7] & 0x80) ? 0xFF : 0x00) != sign) fail("integer does not fit in 64 bits");
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | (static_cast<uint64_t>(i) < n ? b[i] : sign);
    return PyValue::integer(static_cast<int64_t>(v));
  }

  PyValue parse_decimal(std::string_view text) {
    std::string s(text);
    if (!s.empty() && s.back() == 'L') s.pop_back();  // protocol 0's LONG
    if (s.empty()) fail("empty integer");
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0') fail("bad integer '" + s + "'");
    if (errno == ERANGE) fail("integer does not fit in 64 bits");
    return PyValue::integer(v);
  }

  // raw-unicode-escape (protocol 0's UNICODE): latin-1 bytes plus \uXXXX and \UXXXXXXXX.
  std::string raw_unicode(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      const int width = (s[i] == '\\' && i + 1 < s.size()) ? (s[i + 1] == 'u' ? 4 : s[i + 1] == 'U' ? 8 : 0) : 0;
      if (width && i + 2 + width <= s.size()) {
        const std::string hex(s.substr(i + 2, width));
        char* end = nullptr;
        const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
        if (*end != '\0' || cp > 0x10FFFF) fail("bad escape in UNICODE");
        append_utf8(out, static_cast<uint32_t>(cp));
        i += 1 + width;
      } else {
        append_utf8(out, static_cast<unsigned char>(s[i]));
      }
    }
    return out;
  }

  void memo_put(int64_t index) {
    if (index < 0) fail("negative memo key");
    memo_[static_cast<uint64_t>(index)] = top();
  }
  void memo_get(int64_t index) {
    auto it = memo_.find(static_cast<uint64_t>(index));
    if (it == memo_.end()) fail("memo key " + std::to_string(index) + " was never stored");
    push(it->second);
  }

  PyValue reduce(PyValue callable, PyValue args, bool newobj) {
    if (args.kind() != PyValue::Kind::kTuple) fail("arguments of " + callable.repr() + " are not a tuple");
    if (hooks_.resolve_reduce) {
      if (auto v = hooks_.resolve_reduce(callable, args)) return std::move(*v);
    }
    if (auto v = resolve_builtin(callable, args)) return std::move(*v);
    return PyValue::object(std::move(callable), std::move(args), PyValue::none(), newobj);
  }

  PyValue persistent(PyValue pid) {
    if (!hooks_.persistent_load) fail("persistent id " + pid.repr() + " but no persistent_load");
    return hooks_.persistent_load(pid);
  }

  PyValue& list_target() {
    PyValue& target = top();
    if (target.kind() != PyValue::Kind::kList) fail("APPEND to " + target.repr() + ", which is not a list");
    return target;
  }
  PyValue& dict_target() {
    PyValue& target = top();
    if (target.kind() != PyValue::Kind::kDict) fail("SETITEM on " + target.repr() + ", which is not a dict");
    return target;
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const int protocol = u8();
        if (protocol > 5) fail("unsupported pickle protocol " + std::to_string(protocol));
        break;
      }
      case 0x95: {  // FRAME: a length hint; the opcodes follow inline
        const uint64_t n = le(8);
        if (n > data_.size() - pos_) fail("truncated data (a frame of " + std::to_string(n) + " bytes)");
        break;
      }
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case '0':                                          // POP
        if (!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back())) {
          stack_.pop_back();
        } else {
          pop_mark();
        }
        break;
      case '1': pop_mark(); break;   // POP_MARK
      case '2': push(top()); break;  // DUP
      case 'N': push(PyValue::none()); break;
      case 0x88: push(PyValue::boolean(true)); break;   // NEWTRUE
      case 0x89: push(PyValue::boolean(false)); break;  // NEWFALSE
      case 'I': {                                       // INT (protocol 0; "I01"/"I00" are True/False)
        const std::string_view s = line();
        if (s == "01" || s == "00") {
          push(PyValue::boolean(s == "01"));
        } else {
          push(parse_decimal(s));
        }
        break;
      }
      case 'L': push(parse_decimal(line())); break;                          // LONG
      case 'J': push(PyValue::integer(static_cast<int32_t>(le(4)))); break;  // BININT
      case 'K': push(PyValue::integer(u8())); break;                         // BININT1
      case 'M': push(PyValue::integer(static_cast<int64_t>(le(2)))); break;  // BININT2
      case 0x8a: {                                                           // LONG1
        const uint64_t n = u8();
        push(decode_long(take(n), n));
        break;
      }
      case 0x8b: {  // LONG4
        const uint64_t n = le(4);
        push(decode_long(take(n), n));
        break;
      }
      case 'F': {  // FLOAT (protocol 0)
        const std::string s(line());
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0') fail("bad float '" + s + "'");
        push(PyValue::real(v));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const auto* p = reinterpret_cast<const unsigned char*>(take(8));
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
        double v;
        std::memcpy(&v, &bits, 8);
        push(PyValue::real(v));
        break;
      }
      case 'X': {  // BINUNICODE
        const uint64_t n = le(4);
        push(PyValue::string(std::string(take(n), n)));
        break;
      }
      case 0x8c: {  // SHORT_BINUNICODE
        const uint64_t n = u8();
        push(PyValue::string(std::string(take(n), n)));
        break;
      }
      case 0x8d: {  // BINUNICODE8
        const uint64_t n = le(8);
        push(PyValue::string(std::string(take(n), n)));
        break;
      }
      case 'V': push(PyValue::string(raw_unicode(line()))); break;  // UNICODE
      case 'T': {  // BINSTRING (a Python 2 str; torch.load decodes it as UTF-8)
        const uint64_t n = le(4);
        push(PyValue::string(std::string(take(n), n)));
        break;
      }
      case 'U': {  // SHORT_BINSTRING
        const uint64_t n = u8();
        push(PyValue::string(std::string(take(n), n)));
        break;
      }
      case 'B': {  // BINBYTES
        const uint64_t n = le(4);
        push(PyValue::bytes(std::string(take(n), n)));
        break;
      }
      case 'C': {  // SHORT_BINBYTES
        const uint64_t n = u8();
        push(PyValue::bytes(std::string(take(n), n)));
        break;
      }
      case 0x8e:    // BINBYTES8
      case 0x96: {  // BYTEARRAY8
        const uint64_t n = le(8);
        push(PyValue::bytes(std::string(take(n), n)));
        break;
      }
      case ')': push(PyValue::tuple({})); break;          // EMPTY_TUPLE
      case 't': push(PyValue::tuple(pop_mark())); break;  // TUPLE
      case 0x85: {                                        // TUPLE1
        PyValue a = pop();
        push(PyValue::tuple({std::move(a)}));
        break;
      }
      case 0x86: {  // TUPLE2
        PyValue b = pop(), a = pop();
        push(PyValue::tuple({std::move(a), std::move(b)}));
        break;
      }
      case 0x87: {  // TUPLE3
        PyValue c = pop(), b = pop(), a = pop();
        push(PyValue::tuple({std::move(a), std::move(b), std::move(c)}));
        break;
      }
      case ']': push(PyValue::list({})); break;           // EMPTY_LIST
      case 'l': push(PyValue::list(pop_mark())); break;   // LIST
      case 0x8f: push(PyValue::list({})); break;          // EMPTY_SET (as a list)
      case 0x91: push(PyValue::list(pop_mark())); break;  // FROZENSET (as a list)
      case 'a': {                                         // APPEND
        PyValue item = pop();
        list_target().append(std::move(item));
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        std::vector<PyValue> items = pop_mark();
        PyValue& target = list_target();
        for (auto& item : items) target.append(std::move(item));
        break;
      }
      case '}': push(PyValue::dict({})); break;  // EMPTY_DICT
      case 'd': {                                // DICT
        std::vector<PyValue> items = pop_mark();
        if (items.size() % 2) fail("DICT with an odd number of items");
        std::vector<std::pair<PyValue, PyValue>> pairs;
        for (size_t i = 0; i < items.size(); i += 2) pairs.emplace_back(items[i], items[i + 1]);
        push(PyValue::dict(std::move(pairs)));
        break;
      }
      case 's': {  // SETITEM
        PyValue value = pop(), key = pop();
        dict_target().set_item(std::move(key), std::move(value));
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<PyValue> items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        PyValue& target = dict_target();
        for (size_t i = 0; i < items.size(); i += 2) target.set_item(std::move(items[i]), std::move(items[i + 1]));
        break;
      }
      case 'c': {  // GLOBAL
        std::string module(line());
        std::string name(line());
        push(PyValue::global(std::move(module), std::move(name)));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PyValue name = pop(), module = pop();
        if (module.kind() != PyValue::Kind::kString || name.kind() != PyValue::Kind::kString) {
          fail("STACK_GLOBAL needs two strings");
        }
        push(PyValue::global(module.as_string(), name.as_string()));
        break;
      }
      case 'R': {  // REDUCE
        PyValue args = pop(), callable = pop();
        push(reduce(std::move(callable), std::move(args), false));
        break;
      }
      case 0x81: {  // NEWOBJ
        PyValue args = pop(), cls = pop();
        push(reduce(std::move(cls), std::move(args), true));
        break;
      }
      case 0x92: {  // NEWOBJ_EX
        PyValue kwargs = pop(), args = pop(), cls = pop();
        if (kwargs.kind() != PyValue::Kind::kDict || !kwargs.dict_items().empty()) {
          fail("NEWOBJ_EX with keyword arguments is not supported");
        }
        push(reduce(std::move(cls), std::move(args), true));
        break;
      }
      case 'o': {  // OBJ (protocol 1): MARK cls args... OBJ
        std::vector<PyValue> items = pop_mark();
        if (items.empty()) fail("OBJ without a class");
        PyValue cls = items.front();
        push(reduce(std::move(cls), PyValue::tuple(std::vector<PyValue>(items.begin() + 1, items.end())), false));
        break;
      }
      case 'i': {  // INST (protocol 0): module, name lines; MARK args... INST
        std::string module(line());
        std::string name(line());
        push(reduce(PyValue::global(std::move(module), std::move(name)), PyValue::tuple(pop_mark()), false));
        break;
      }
      case 'b': {  // BUILD
        PyValue state = pop();
        PyValue& inst = top();
        if (inst.kind() == PyValue::Kind::kObject) inst.set_state(std::move(state));
        break;
      }
      case 'p': memo_put(parse_decimal(line()).as_int()); break;                // PUT
      case 'q': memo_put(u8()); break;                                          // BINPUT
      case 'r': memo_put(le(4)); break;                                         // LONG_BINPUT
      case 0x94: memo_put(static_cast<int64_t>(memo_.size())); break;           // MEMOIZE
      case 'g': memo_get(parse_decimal(line()).as_int()); break;                // GET
      case 'h': memo_get(u8()); break;                                          // BINGET
      case 'j': memo_get(le(4)); break;                                         // LONG_BINGET
      case 'P': push(persistent(PyValue::string(std::string(line())))); break;  // PERSID
      case 'Q': push(persistent(pop())); break;                                 // BINPERSID
      case 0x82:
      case 0x83:
      case 0x84: fail("the extension registry (EXT1/2/4) is not supported");
      case 0x97:
      case 0x98: fail("out-of-band buffers (protocol 5) are not supported");
      case 'S': fail("protocol 0 STRING is not supported");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unknown opcode ") + hex);
      }
    }
  }

  std::string_view data_;
  const std::string& what_;
  const UnpickleHooks& hooks_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<PyValue> stack_;
  std::vector<size_t> marks_;  // stack sizes at each MARK
  std::unordered_map<uint64_t, PyValue> memo_;
};

PyValue unpickle(std::string_view bytes, const std::string& what, const UnpickleHooks& hooks) {
  return Unpickler(bytes, what, hooks).run();
}

}  // namespace megacpp::io::serialization
