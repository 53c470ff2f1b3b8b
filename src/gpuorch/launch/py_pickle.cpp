// Python's pickle opcodes as the format's own documentation (pickletools) defines them; integers
// are little-endian. The reader is a stack machine over an arena of values: memo entries and the
// stack point into it, so a value referenced twice (a node in two dicts) is one value, and a
// cycle a hostile pickle builds costs nothing to hold or free.
#include "gpuorch/launch/py_pickle.hpp"

#include <fmt/format.h>

#include <cstring>
#include <unordered_map>

namespace gpuorch::launch::pickle {
namespace {

// Opcodes by protocol (pickletools): 0/1, 2, 3, 4.
enum Op : unsigned char {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kProto = 0x80,
  kNewObj = 0x81,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kEmptySet = 0x8f,
  kAddItems = 0x90,
  kFrozenSet = 0x91,
  kNewObjEx = 0x92,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      n = 3, cp = c & 0x07;
    else
      return false;
    if (i + n >= s.size()) return false;  // the continuation bytes run past the end
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

class Machine {
 public:
  Machine(std::string_view in, std::deque<Value>& arena) : in_(in), arena_(arena) {}

  const Value* run() {
    for (;;) {
      at_ = pos_;
      const auto op = static_cast<unsigned char>(take(1)[0]);
      if (op == kStop) {
        if (stack_.size() != 1 || !marks_.empty())
          fail("STOP with a stack of {} values", stack_.size());
        if (pos_ != in_.size()) fail("{} bytes after STOP", in_.size() - pos_);
        return stack_.back();
      }
      step(op);
    }
  }

 private:
  template <typename... A>
  [[noreturn]] void fail(fmt::format_string<A...> what, A&&... args) const {
    throw PickleError(
        fmt::format("pickle byte {}: {}", at_, fmt::format(what, std::forward<A>(args)...)));
  }

  std::string_view take(std::uint64_t n) {
    if (n > in_.size() - pos_) fail("needs {} more bytes, has {}", n, in_.size() - pos_);
    const auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint64_t unsigned_le(int bytes) {
    const auto s = take(bytes);
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }
  std::string_view line() {
    const auto end = in_.find('\n', pos_);
    if (end == std::string_view::npos) fail("a name without its newline");
    const std::size_t n = end - pos_;
    return take(n + 1).substr(0, n);
  }

  Value* make(Kind kind) {
    arena_.emplace_back();
    arena_.back().kind = kind;
    return &arena_.back();
  }
  void push(Value* v) { stack_.push_back(v); }
  Value* pop() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    auto* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    return stack_.back();
  }
  [[nodiscard]] std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values pushed since the last MARK, which is dropped.
  std::vector<const Value*> since_mark() {
    if (marks_.empty()) fail("no MARK");
    const auto from = marks_.back();
    marks_.pop_back();
    std::vector<const Value*> out(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    return out;
  }
  Value* expect(Value* v, Kind kind, const char* op) {
    if (v->kind != kind) fail("{} on a {}, not a {}", op, kind_name(v->kind), kind_name(kind));
    return v;
  }
  void push_text(Kind kind, std::uint64_t n) {
    auto* v = make(kind);
    v->text = std::string(take(n));
    if (kind == Kind::kStr && !valid_utf8(v->text)) fail("a str that is not UTF-8");
    push(v);
  }
  void push_int(std::int64_t i) {
    auto* v = make(Kind::kInt);
    v->integer = i;
    push(v);
  }
  void push_long(std::uint64_t n) {
    if (n > 8) fail("an integer of {} bytes (at most 8 here)", n);
    const auto s = take(n);
    std::uint64_t u = 0;
    for (std::size_t i = n; i-- > 0;) u = (u << 8) | static_cast<unsigned char>(s[i]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(s[n - 1]) & 0x80))
      u |= ~std::uint64_t{0} << (8 * n);
    push_int(static_cast<std::int64_t>(u));
  }
  void push_tuple(std::vector<const Value*> items) {
    auto* v = make(Kind::kTuple);
    v->items = std::move(items);
    push(v);
  }
  void push_global(std::string module, std::string name) {
    auto* v = make(Kind::kGlobal);
    v->text = std::move(module);
    v->name = std::move(name);
    push(v);
  }
  void push_object(const Value* callable, const Value* args, const char* op) {
    if (callable->kind != Kind::kGlobal)
      fail("{} of a {}, not a class", op, kind_name(callable->kind));
    if (args->kind != Kind::kTuple)
      fail("{} with {} arguments, not a tuple", op, kind_name(args->kind));
    auto* v = make(Kind::kObject);
    v->callable = callable;
    v->args = args;
    push(v);
  }
  void memo_put(std::uint64_t index) { memo_[index] = top(); }
  void memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry {} was never stored", index);
    push(it->second);
  }
  void set_items(Value* dict, const std::vector<const Value*>& kv) {
    expect(dict, Kind::kDict, "SETITEMS");
    if (kv.size() % 2 != 0) fail("SETITEMS with an odd count {}", kv.size());
    dict->items.insert(dict->items.end(), kv.begin(), kv.end());
  }

  void step(unsigned char op) {
    switch (op) {
      case kProto:
        if (static_cast<unsigned char>(take(1)[0]) > 5) fail("protocol above 5");
        break;
      case kFrame:
        take(8);  // a length hint: the reader does not need frames
        break;
      case kMark:
        marks_.push_back(stack_.size());
        break;
      case kPop:
        pop();
        break;
      case kPopMark:
        since_mark();
        break;
      case kDup:
        push(top());
        break;
      case kNone:
        push(make(Kind::kNone));
        break;
      case kNewTrue:
      case kNewFalse: {
        auto* v = make(Kind::kBool);
        v->boolean = op == kNewTrue;
        push(v);
        break;
      }
      case kBinInt:
        push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(unsigned_le(4))));
        break;
      case kBinInt1:
        push_int(static_cast<std::int64_t>(unsigned_le(1)));
        break;
      case kBinInt2:
        push_int(static_cast<std::int64_t>(unsigned_le(2)));
        break;
      case kLong1:
        push_long(unsigned_le(1));
        break;
      case kLong4:
        push_long(unsigned_le(4));
        break;
      case kBinFloat: {
        const auto s = take(8);
        std::uint64_t bits = 0;
        for (const char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);  // big-endian
        auto* v = make(Kind::kFloat);
        std::memcpy(&v->real, &bits, sizeof bits);
        push(v);
        break;
      }
      case kShortBinUnicode:
        push_text(Kind::kStr, unsigned_le(1));
        break;
      case kBinUnicode:
        push_text(Kind::kStr, unsigned_le(4));
        break;
      case kBinUnicode8:
        push_text(Kind::kStr, unsigned_le(8));
        break;
      case kShortBinBytes:
        push_text(Kind::kBytes, unsigned_le(1));
        break;
      case kBinBytes:
        push_text(Kind::kBytes, unsigned_le(4));
        break;
      case kBinBytes8:
        push_text(Kind::kBytes, unsigned_le(8));
        break;
      case kEmptyTuple:
        push_tuple({});
        break;
      case kTuple:
        push_tuple(since_mark());
        break;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const std::size_t n = op - kTuple1 + 1;
        if (stack_.size() < floor() + n) fail("TUPLE{} with fewer values on the stack", n);
        std::vector<const Value*> items(stack_.end() - static_cast<std::ptrdiff_t>(n),
                                        stack_.end());
        stack_.resize(stack_.size() - n);
        push_tuple(std::move(items));
        break;
      }
      case kEmptyList:
        push(make(Kind::kList));
        break;
      case kList: {
        auto items = since_mark();
        auto* v = make(Kind::kList);
        v->items = std::move(items);
        push(v);
        break;
      }
      case kAppend: {
        const auto* item = pop();
        expect(top(), Kind::kList, "APPEND")->items.push_back(item);
        break;
      }
      case kAppends: {
        const auto items = since_mark();
        auto* list = expect(top(), Kind::kList, "APPENDS");
        list->items.insert(list->items.end(), items.begin(), items.end());
        break;
      }
      case kEmptyDict:
        push(make(Kind::kDict));
        break;
      case kDict: {
        const auto kv = since_mark();
        auto* v = make(Kind::kDict);
        set_items(v, kv);
        push(v);
        break;
      }
      case kSetItem: {
        const auto* value = pop();
        const auto* key = pop();
        set_items(top(), {key, value});
        break;
      }
      case kSetItems: {
        const auto kv = since_mark();
        set_items(top(), kv);
        break;
      }
      case kEmptySet:
        push(make(Kind::kSet));
        break;
      case kAddItems: {
        const auto items = since_mark();
        auto* set = expect(top(), Kind::kSet, "ADDITEMS");
        set->items.insert(set->items.end(), items.begin(), items.end());
        break;
      }
      case kFrozenSet: {
        auto items = since_mark();
        auto* v = make(Kind::kSet);
        v->items = std::move(items);
        push(v);
        break;
      }
      case kGlobal: {
        std::string module(line());
        std::string name(line());
        push_global(std::move(module), std::move(name));
        break;
      }
      case kStackGlobal: {
        const auto* name = pop();
        const auto* module = pop();
        if (module->kind != Kind::kStr || name->kind != Kind::kStr)
          fail("STACK_GLOBAL of non-str names");
        push_global(module->text, name->text);
        break;
      }
      case kNewObj: {
        const auto* args = pop();
        const auto* cls = pop();
        push_object(cls, args, "NEWOBJ");
        break;
      }
      case kNewObjEx: {
        const auto* kwargs = pop();
        const auto* args = pop();
        const auto* cls = pop();
        if (kwargs->kind != Kind::kDict || !kwargs->items.empty())
          fail("NEWOBJ_EX with keyword arguments");
        push_object(cls, args, "NEWOBJ_EX");
        break;
      }
      case kReduce: {
        const auto* args = pop();
        const auto* callable = pop();
        push_object(callable, args, "REDUCE");
        break;
      }
      case kBuild: {
        const auto* state = pop();
        auto* object = expect(top(), Kind::kObject, "BUILD");
        if (object->state) fail("BUILD twice on one object");
        object->state = state;
        break;
      }
      case kMemoize:
        memo_put(memo_.size());
        break;
      case kBinPut:
        memo_put(unsigned_le(1));
        break;
      case kLongBinPut:
        memo_put(unsigned_le(4));
        break;
      case kBinGet:
        memo_get(unsigned_le(1));
        break;
      case kLongBinGet:
        memo_get(unsigned_le(4));
        break;
      default:
        fail("opcode 0x{:02x} is not one this reader takes", op);
    }
  }

  std::string_view in_;
  std::deque<Value>& arena_;
  std::size_t pos_ = 0;
  std::size_t at_ = 0;  // where the current opcode starts, for messages
  std::vector<Value*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value*> memo_;
};

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

Unpickled unpickle(std::string_view bytes) {
  Unpickled u;
  Machine m(bytes, u.values_);
  u.root_ = m.run();
  return u;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kGlobal:
      return "class";
    case Kind::kObject:
      return "object";
  }
  return "value";
}

Pickler::Pickler() : out_("\x80\x04", 2) {}

void Pickler::none() { out_.push_back(static_cast<char>(kNone)); }
void Pickler::boolean(bool v) { out_.push_back(static_cast<char>(v ? kNewTrue : kNewFalse)); }

void Pickler::integer(std::int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out_.push_back(static_cast<char>(kBinInt));
    put_le(out_, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
  } else {
    out_.push_back(static_cast<char>(kLong1));
    out_.push_back(8);
    put_le(out_, static_cast<std::uint64_t>(v), 8);
  }
}

void Pickler::str(std::string_view v) {
  out_.push_back(static_cast<char>(kBinUnicode));
  put_le(out_, v.size(), 4);
  out_.append(v);
}

void Pickler::bytes(std::string_view v) {
  out_.push_back(static_cast<char>(kBinBytes));
  put_le(out_, v.size(), 4);
  out_.append(v);
}

void Pickler::global(std::string_view module, std::string_view name) {
  out_.push_back(static_cast<char>(kGlobal));
  out_.append(module);
  out_.push_back('\n');
  out_.append(name);
  out_.push_back('\n');
}

void Pickler::mark() { out_.push_back(static_cast<char>(kMark)); }
void Pickler::tuple_from_mark() { out_.push_back(static_cast<char>(kTuple)); }
void Pickler::empty_tuple() { out_.push_back(static_cast<char>(kEmptyTuple)); }
void Pickler::empty_dict() { out_.push_back(static_cast<char>(kEmptyDict)); }
void Pickler::set_items_from_mark() { out_.push_back(static_cast<char>(kSetItems)); }
void Pickler::empty_set() { out_.push_back(static_cast<char>(kEmptySet)); }
void Pickler::add_items_from_mark() { out_.push_back(static_cast<char>(kAddItems)); }
void Pickler::new_object() { out_.push_back(static_cast<char>(kNewObj)); }
void Pickler::reduce() { out_.push_back(static_cast<char>(kReduce)); }
void Pickler::build() { out_.push_back(static_cast<char>(kBuild)); }

std::string Pickler::finish() {
  out_.push_back(static_cast<char>(kStop));
  return std::move(out_);
}

}  // namespace gpuorch::launch::pickle
