#include "gpuorch/k8s/mirror/cel_subset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <optional>
#include <utility>
#include <vector>

#include "gpuorch/k8s/api/quantity.hpp"

namespace gpuorch::k8s {

// Kubernetes caps a selector at 10 Ki characters; nesting is capped so that no input can
// exhaust the stack of the recursive parser or evaluator.
constexpr std::size_t kMaxExpressionLength = 10 * 1024;
constexpr int kMaxDepth = 64;

struct DeviceSelector::Node {
  enum class Kind : std::uint8_t {
    kInt,
    kString,
    kBool,
    kDevice,  // the identifier `device`
    kSelect,  // a.field
    kIndex,   // a[b]
    kHas,     // has(a.field)
    kCall,    // a.method(args) or function(args)
    kNot,
    kNegate,
    kAnd,
    kOr,
    kCompare,  // op: == != < <= > >=
    kIn,
    kList,
  };
  Kind kind = Kind::kInt;
  std::int64_t number = 0;
  std::string text;  // string literal, field, function or method name, comparison operator
  bool method = false;
  std::vector<std::shared_ptr<const Node>> kids;
};

namespace {

using Node = DeviceSelector::Node;
using NodePtr = std::shared_ptr<const Node>;

// ------------------------------------------------------------------------------------ lexer

enum class Tok : std::uint8_t { kEnd, kIdent, kInt, kString, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier, punctuation, or the string literal's value
  std::int64_t number = 0;
  std::size_t at = 0;
};

[[noreturn]] void fail(std::size_t at, const std::string& what) {
  throw SelectorError(fmt::format("at column {}: {}", at + 1, what));
}

std::vector<Token> lex(const std::string& s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.at = i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      t.kind = Tok::kIdent;
      t.text = s.substr(i, j - i);
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && (s[j] == '.' || s[j] == 'e' || s[j] == 'E' || s[j] == 'x' ||
                           s[j] == 'u' || s[j] == 'U')) {
        fail(j, "only decimal int literals are in gpuorch's CEL subset (no doubles, uints, hex)");
      }
      t.kind = Tok::kInt;
      const auto r = std::from_chars(s.data() + i, s.data() + j, t.number);
      if (r.ec != std::errc()) fail(i, "int literal out of range");
      i = j;
    } else if (c == '"' || c == '\'') {
      if (s.compare(i, 3, std::string(3, c)) == 0)
        fail(i, "triple-quoted strings are not in the subset");
      std::size_t j = i + 1;
      std::string value;
      while (true) {
        if (j >= s.size()) fail(i, "unterminated string");
        const char d = s[j];
        if (d == c) break;
        if (d == '\\') {
          if (j + 1 >= s.size()) fail(j, "unterminated string");
          const char e = s[j + 1];
          switch (e) {
            case '\\':
              value += '\\';
              break;
            case '"':
              value += '"';
              break;
            case '\'':
              value += '\'';
              break;
            case 'n':
              value += '\n';
              break;
            case 't':
              value += '\t';
              break;
            default:
              fail(j, fmt::format("escape \\{} is not in the subset", e));
          }
          j += 2;
          continue;
        }
        value += d;
        ++j;
      }
      t.kind = Tok::kString;
      t.text = std::move(value);
      i = j + 1;
    } else {
      static constexpr std::string_view kTwo[] = {"&&", "||", "==", "!=", "<=", ">="};
      t.kind = Tok::kPunct;
      for (const auto two : kTwo) {
        if (s.compare(i, 2, two) == 0) t.text = std::string(two);
      }
      if (t.text.empty()) {
        if (std::string_view(".[](),!-<>").find(c) == std::string_view::npos) {
          fail(i, fmt::format("'{}' is not in gpuorch's CEL subset", c));
        }
        t.text = std::string(1, c);
      }
      i += t.text.size();
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{Tok::kEnd, "", 0, s.size()});
  return out;
}

// ----------------------------------------------------------------------------------- parser

bool known_method(const std::string& name) {
  static constexpr std::string_view kMethods[] = {"startsWith", "endsWith",      "contains",
                                                  "compareTo",  "isGreaterThan", "isLessThan"};
  return std::find(std::begin(kMethods), std::end(kMethods), name) != std::end(kMethods);
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  NodePtr parse() {
    NodePtr e = expr(0);
    if (peek().kind != Tok::kEnd) fail(peek().at, fmt::format("unexpected '{}'", peek().text));
    return e;
  }

 private:
  const Token& peek() const { return t_[pos_]; }
  bool punct(const char* p) const { return peek().kind == Tok::kPunct && peek().text == p; }
  bool accept(const char* p) {
    if (!punct(p)) return false;
    ++pos_;
    return true;
  }
  void expect(const char* p) {
    if (!accept(p)) {
      fail(peek().at, fmt::format("expected '{}', found '{}'", p,
                                  peek().kind == Tok::kEnd ? "the end" : peek().text));
    }
  }
  static void guard(int depth, std::size_t at) {
    if (depth > kMaxDepth) fail(at, fmt::format("nested deeper than {}", kMaxDepth));
  }
  static NodePtr make(Node::Kind k, std::vector<NodePtr> kids, std::string text = {}) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->kids = std::move(kids);
    n->text = std::move(text);
    return n;
  }

  NodePtr expr(int depth) {
    guard(depth, peek().at);
    NodePtr e = or_expr(depth);
    if (punct("?") || punct(":")) fail(peek().at, "the conditional operator is not in the subset");
    return e;
  }
  // n-ary, so a long chain of terms is one level deep, not one level per term.
  NodePtr or_expr(int depth) {
    std::vector<NodePtr> terms{and_expr(depth)};
    while (accept("||")) terms.push_back(and_expr(depth));
    return terms.size() == 1 ? terms[0] : make(Node::Kind::kOr, std::move(terms));
  }
  NodePtr and_expr(int depth) {
    std::vector<NodePtr> terms{relation(depth)};
    while (accept("&&")) terms.push_back(relation(depth));
    return terms.size() == 1 ? terms[0] : make(Node::Kind::kAnd, std::move(terms));
  }
  NodePtr relation(int depth) {
    NodePtr l = unary(depth);
    for (int chain = depth;; ++chain) {
      guard(chain, peek().at);
      if (peek().kind == Tok::kIdent && peek().text == "in") {
        ++pos_;
        l = make(Node::Kind::kIn, {l, unary(depth)});
        continue;
      }
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (punct(o)) op = o;
      }
      if (op.empty()) return l;
      ++pos_;
      l = make(Node::Kind::kCompare, {l, unary(depth)}, op);
    }
  }
  NodePtr unary(int depth) {
    guard(depth, peek().at);
    if (accept("!")) return make(Node::Kind::kNot, {unary(depth + 1)});
    if (accept("-")) return make(Node::Kind::kNegate, {unary(depth + 1)});
    return member(depth);
  }
  NodePtr member(int depth) {
    NodePtr e = primary(depth);
    for (int chain = depth;; ++chain) {
      guard(chain, peek().at);
      if (accept(".")) {
        if (peek().kind != Tok::kIdent) fail(peek().at, "expected a field or method name");
        const std::size_t name_at = peek().at;
        std::string name = t_[pos_++].text;
        if (accept("(")) {
          if (!known_method(name)) {
            fail(name_at, fmt::format("method '{}' is not in gpuorch's CEL subset", name));
          }
          std::vector<NodePtr> kids{e};
          args(depth, kids);
          auto n = std::make_shared<Node>();
          n->kind = Node::Kind::kCall;
          n->text = std::move(name);
          n->method = true;
          n->kids = std::move(kids);
          e = n;
        } else {
          if (e->kind == Node::Kind::kDevice && name != "driver" && name != "attributes" &&
              name != "capacity") {
            fail(name_at, fmt::format("device.{} is not in gpuorch's CEL subset", name));
          }
          e = make(Node::Kind::kSelect, {e}, std::move(name));
        }
      } else if (accept("[")) {
        NodePtr key = expr(depth + 1);
        expect("]");
        e = make(Node::Kind::kIndex, {e, key});
      } else {
        return e;
      }
    }
  }
  void args(int depth, std::vector<NodePtr>& out) {
    if (accept(")")) return;
    do {
      out.push_back(expr(depth + 1));
    } while (accept(","));
    expect(")");
  }
  NodePtr primary(int depth) {
    const Token& t = peek();
    if (t.kind == Tok::kInt) {
      ++pos_;
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kInt;
      n->number = t.number;
      return n;
    }
    if (t.kind == Tok::kString) {
      ++pos_;
      return make(Node::Kind::kString, {}, t.text);
    }
    if (accept("(")) {
      NodePtr e = expr(depth + 1);
      expect(")");
      return e;
    }
    if (accept("[")) {
      std::vector<NodePtr> items;
      if (!accept("]")) {
        do {
          items.push_back(expr(depth + 1));
        } while (accept(","));
        expect("]");
      }
      return make(Node::Kind::kList, std::move(items));
    }
    if (t.kind == Tok::kIdent) {
      const std::string name = t.text;
      const std::size_t at = t.at;
      ++pos_;
      if (name == "true" || name == "false") {
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kBool;
        n->number = name == "true" ? 1 : 0;
        return n;
      }
      if (name == "device") return make(Node::Kind::kDevice, {});
      if (accept("(")) {
        if (name == "has") {
          NodePtr arg = expr(depth + 1);
          expect(")");
          if (arg->kind != Node::Kind::kSelect && arg->kind != Node::Kind::kIndex) {
            fail(at, "has() takes a field selection");
          }
          return make(Node::Kind::kHas, {arg});
        }
        if (name != "quantity" && name != "semver") {
          fail(at, fmt::format("function '{}' is not in gpuorch's CEL subset", name));
        }
        std::vector<NodePtr> kids;
        args(depth, kids);
        if (kids.size() != 1) fail(at, fmt::format("{}() takes one argument", name));
        return make(Node::Kind::kCall, std::move(kids), name);
      }
      fail(at, fmt::format("identifier '{}' is not in gpuorch's CEL subset (only 'device')", name));
    }
    fail(t.at, t.kind == Tok::kEnd ? "unexpected end of the expression"
                                   : fmt::format("unexpected '{}'", t.text));
  }

  std::vector<Token> t_;
  std::size_t pos_ = 0;
};

// -------------------------------------------------------------------------------- evaluation

struct Value {
  enum class Kind : std::uint8_t {
    kInt,
    kBool,
    kString,
    kVersion,
    kQuantity,
    kList,
    kDevice,
    kAttributes,  // device.attributes or device.capacity: a map of domains
    kDomain,      // device.attributes["domain"]: a map of names
  } kind = Kind::kInt;
  std::int64_t number = 0;  // int, bool, quantity milli
  std::string text;         // string; kDomain: the domain
  SemVer version;
  bool capacity = false;  // kAttributes, kDomain: of capacity rather than attributes
  std::vector<Value> list;
};

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kVersion:
      return "version";
    case Value::Kind::kQuantity:
      return "quantity";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDevice:
      return "device";
    case Value::Kind::kAttributes:
      return "map";
    case Value::Kind::kDomain:
      return "map";
  }
  return "value";
}

Value boolean(bool b) {
  Value v;
  v.kind = Value::Kind::kBool;
  v.number = b ? 1 : 0;
  return v;
}

class Evaluator {
 public:
  explicit Evaluator(const SelectorDevice& d) : d_(d) {}

  Value eval(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kInt: {
        Value v;
        v.number = n.number;
        return v;
      }
      case Node::Kind::kBool:
        return boolean(n.number != 0);
      case Node::Kind::kString: {
        Value v;
        v.kind = Value::Kind::kString;
        v.text = n.text;
        return v;
      }
      case Node::Kind::kDevice: {
        Value v;
        v.kind = Value::Kind::kDevice;
        return v;
      }
      case Node::Kind::kList: {
        Value v;
        v.kind = Value::Kind::kList;
        for (const auto& k : n.kids) v.list.push_back(eval(*k));
        return v;
      }
      case Node::Kind::kSelect:
        return field(eval(*n.kids[0]), n.text);
      case Node::Kind::kIndex: {
        const Value key = eval(*n.kids[1]);
        if (key.kind != Value::Kind::kString) {
          throw SelectorError(
              fmt::format("a map is indexed by a string, not a {}", kind_name(key.kind)));
        }
        return field(eval(*n.kids[0]), key.text);
      }
      case Node::Kind::kHas: {
        const Node& sel = *n.kids[0];
        const Value map = eval(*sel.kids[0]);
        std::string key = sel.text;
        if (sel.kind == Node::Kind::kIndex) {
          const Value k = eval(*sel.kids[1]);
          if (k.kind != Value::Kind::kString) throw SelectorError("has() of a non-string key");
          key = k.text;
        }
        return boolean(contains(map, key));
      }
      case Node::Kind::kNot: {
        const Value v = eval(*n.kids[0]);
        return boolean(!as_bool(v, "!"));
      }
      case Node::Kind::kNegate: {
        Value v = eval(*n.kids[0]);
        if (v.kind != Value::Kind::kInt || v.number == INT64_MIN) {
          throw SelectorError("unary - takes an int");
        }
        v.number = -v.number;
        return v;
      }
      case Node::Kind::kAnd:
      case Node::Kind::kOr:
        return logic(n);
      case Node::Kind::kCompare:
        return compare(eval(*n.kids[0]), eval(*n.kids[1]), n.text);
      case Node::Kind::kIn:
        return in(eval(*n.kids[0]), eval(*n.kids[1]));
      case Node::Kind::kCall:
        return call(n);
    }
    throw SelectorError("unknown expression");
  }

  static bool as_bool(const Value& v, const char* what) {
    if (v.kind != Value::Kind::kBool) {
      throw SelectorError(fmt::format("{} takes a bool, not a {}", what, kind_name(v.kind)));
    }
    return v.number != 0;
  }

 private:
  // CEL's commutative logic: a decided side wins over an error on the other.
  Value logic(const Node& n) {
    const bool is_and = n.kind == Node::Kind::kAnd;
    const char* op = is_and ? "&&" : "||";
    std::optional<SelectorError> error;
    for (const auto& k : n.kids) {
      try {
        const bool b = as_bool(eval(*k), op);
        if (b != is_and) return boolean(b);  // false for &&, true for ||
      } catch (const SelectorError& e) {
        if (!error) error = e;
      }
    }
    if (error) throw *error;
    return boolean(is_and);
  }

  std::string qualified(const Value& domain, const std::string& name) const {
    return domain.text + "/" + name;
  }

  bool contains(const Value& map, const std::string& key) const {
    if (map.kind == Value::Kind::kDomain) {
      const std::string q = qualified(map, key);
      return map.capacity ? d_.capacity_milli.contains(q) : d_.attributes.contains(q);
    }
    if (map.kind == Value::Kind::kAttributes) {
      const std::string prefix = key + "/";
      auto starts = [&](const auto& m) {
        const auto it = m.lower_bound(prefix);
        return it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0;
      };
      return map.capacity ? starts(d_.capacity_milli) : starts(d_.attributes);
    }
    throw SelectorError(fmt::format("has() or in on a {}", kind_name(map.kind)));
  }

  Value field(const Value& of, const std::string& name) const {
    Value v;
    switch (of.kind) {
      case Value::Kind::kDevice:
        if (name == "driver") {
          v.kind = Value::Kind::kString;
          v.text = d_.driver;
          return v;
        }
        if (name == "attributes" || name == "capacity") {
          v.kind = Value::Kind::kAttributes;
          v.capacity = name == "capacity";
          return v;
        }
        throw SelectorError(fmt::format("device.{} is not in gpuorch's CEL subset", name));
      case Value::Kind::kAttributes:
        v.kind = Value::Kind::kDomain;
        v.capacity = of.capacity;
        v.text = name;
        return v;
      case Value::Kind::kDomain: {
        const std::string q = qualified(of, name);
        if (of.capacity) {
          const auto it = d_.capacity_milli.find(q);
          if (it == d_.capacity_milli.end()) throw SelectorError(fmt::format("no such key: {}", q));
          v.kind = Value::Kind::kQuantity;
          v.number = it->second;
          return v;
        }
        const auto it = d_.attributes.find(q);
        if (it == d_.attributes.end()) throw SelectorError(fmt::format("no such key: {}", q));
        return std::visit(
            [](const auto& a) {
              Value r;
              using T = std::decay_t<decltype(a)>;
              if constexpr (std::is_same_v<T, std::int64_t>) {
                r.number = a;
              } else if constexpr (std::is_same_v<T, bool>) {
                r = boolean(a);
              } else if constexpr (std::is_same_v<T, std::string>) {
                r.kind = Value::Kind::kString;
                r.text = a;
              } else {
                r.kind = Value::Kind::kVersion;
                r.version = a;
              }
              return r;
            },
            it->second);
      }
      default:
        throw SelectorError(fmt::format("a {} has no field '{}'", kind_name(of.kind), name));
    }
  }

  static bool equal(const Value& a, const Value& b) {
    if (a.kind != b.kind) {
      throw SelectorError(
          fmt::format("no == between a {} and a {}", kind_name(a.kind), kind_name(b.kind)));
    }
    switch (a.kind) {
      case Value::Kind::kInt:
      case Value::Kind::kBool:
      case Value::Kind::kQuantity:
        return a.number == b.number;
      case Value::Kind::kString:
        return a.text == b.text;
      case Value::Kind::kVersion:
        return a.version == b.version;
      default:
        throw SelectorError(fmt::format("no == between {}s", kind_name(a.kind)));
    }
  }

  static Value compare(const Value& a, const Value& b, const std::string& op) {
    if (op == "==") return boolean(equal(a, b));
    if (op == "!=") return boolean(!equal(a, b));
    int c = 0;
    if (a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt) {
      c = a.number < b.number ? -1 : a.number > b.number ? 1 : 0;
    } else if (a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) {
      c = a.text.compare(b.text);
    } else {
      throw SelectorError(
          fmt::format("no {} between a {} and a {} (versions and quantities: "
                      "compareTo, isGreaterThan, isLessThan)",
                      op, kind_name(a.kind), kind_name(b.kind)));
    }
    if (op == "<") return boolean(c < 0);
    if (op == "<=") return boolean(c <= 0);
    if (op == ">") return boolean(c > 0);
    return boolean(c >= 0);
  }

  Value in(const Value& item, const Value& of) const {
    if (of.kind == Value::Kind::kList) {
      for (const Value& v : of.list) {
        if (v.kind == item.kind && equal(v, item)) return boolean(true);
      }
      return boolean(false);
    }
    if (item.kind != Value::Kind::kString) throw SelectorError("in on a map takes a string key");
    return boolean(contains(of, item.text));
  }

  Value call(const Node& n) {
    if (!n.method) {
      const Value arg = eval(*n.kids[0]);
      if (arg.kind != Value::Kind::kString) {
        throw SelectorError(fmt::format("{}() takes a string", n.text));
      }
      Value v;
      if (n.text == "quantity") {
        const auto milli = quantity_milli(arg.text);
        if (!milli) throw SelectorError(fmt::format("quantity(\"{}\"): not a quantity", arg.text));
        v.kind = Value::Kind::kQuantity;
        v.number = *milli;
        return v;
      }
      v.kind = Value::Kind::kVersion;
      if (!parse_semver(arg.text, v.version)) {
        throw SelectorError(fmt::format("semver(\"{}\"): not a semantic version", arg.text));
      }
      return v;
    }
    const Value target = eval(*n.kids[0]);
    std::vector<Value> args;
    for (std::size_t i = 1; i < n.kids.size(); ++i) args.push_back(eval(*n.kids[i]));
    if (args.size() != 1) throw SelectorError(fmt::format("{}() takes one argument", n.text));
    const Value& arg = args[0];
    if (n.text == "startsWith" || n.text == "endsWith" || n.text == "contains") {
      if (target.kind != Value::Kind::kString || arg.kind != Value::Kind::kString) {
        throw SelectorError(fmt::format("{}() is a method of strings", n.text));
      }
      const std::string& s = target.text;
      const std::string& p = arg.text;
      if (n.text == "contains") return boolean(s.find(p) != std::string::npos);
      if (p.size() > s.size()) return boolean(false);
      return boolean(n.text == "startsWith" ? s.compare(0, p.size(), p) == 0
                                            : s.compare(s.size() - p.size(), p.size(), p) == 0);
    }
    if (n.text == "compareTo" || n.text == "isGreaterThan" || n.text == "isLessThan") {
      int c = 0;
      if (target.kind == Value::Kind::kQuantity && arg.kind == Value::Kind::kQuantity) {
        c = target.number < arg.number ? -1 : target.number > arg.number ? 1 : 0;
      } else if (target.kind == Value::Kind::kVersion && arg.kind == Value::Kind::kVersion) {
        c = target.version < arg.version ? -1 : target.version > arg.version ? 1 : 0;
      } else {
        throw SelectorError(fmt::format("{}() between a {} and a {}", n.text,
                                        kind_name(target.kind), kind_name(arg.kind)));
      }
      if (n.text == "compareTo") {
        Value v;
        v.number = c;
        return v;
      }
      return boolean(n.text == "isGreaterThan" ? c > 0 : c < 0);
    }
    throw SelectorError(fmt::format("method '{}' is not in gpuorch's CEL subset", n.text));
  }

  const SelectorDevice& d_;
};

}  // namespace

bool parse_semver(const std::string& text, SemVer& out) {
  std::int64_t parts[3] = {0, 0, 0};
  std::size_t i = 0;
  for (int p = 0; p < 3; ++p) {
    if (p > 0) {
      if (i >= text.size() || text[i] != '.') return false;
      ++i;
    }
    const std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start || (i - start > 1 && text[start] == '0')) return false;
    if (std::from_chars(text.data() + start, text.data() + i, parts[p]).ec != std::errc()) {
      return false;
    }
  }
  if (i < text.size() && text[i] != '-' && text[i] != '+') return false;
  out = SemVer{parts[0], parts[1], parts[2]};
  return true;
}

DeviceSelector DeviceSelector::parse(const std::string& expression) {
  if (expression.size() > kMaxExpressionLength) {
    throw SelectorError(fmt::format("longer than {} characters", kMaxExpressionLength));
  }
  DeviceSelector s;
  s.text_ = expression;
  s.root_ = Parser(lex(expression)).parse();
  return s;
}

bool DeviceSelector::matches(const SelectorDevice& device) const {
  Evaluator e(device);
  return Evaluator::as_bool(e.eval(*root_), "a selector");
}

}  // namespace gpuorch::k8s
