#pragma once
// A small reader and writer of Python's pickle format, for the one pickled value the launcher
// shares with PyTorch: the c10d rendezvous state torchrun's agents keep in their store
// (torch_rdzv_state.hpp). The reader runs no code: a class reference stays a name, and building an
// object (NEWOBJ, REDUCE, BUILD) is recorded, not performed, so a hostile value can only be
// refused. It takes the opcodes `pickle.dumps` writes for plain data and for objects rebuilt by
// class reference (protocols 2 to 5); anything else, or anything malformed, is one PickleError.
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::launch::pickle {

class PickleError : public std::runtime_error {
 public:
  explicit PickleError(const std::string& message) : std::runtime_error(message) {}
};

enum class Kind {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kBytes,
  kTuple,
  kList,
  kDict,
  kSet,
  kGlobal,
  kObject
};

struct Value {
  Kind kind = Kind::kNone;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0;
  std::string text;                 // str, bytes; a global's module
  std::string name;                 // a global's name
  std::vector<const Value*> items;  // tuple, list, set; dict: key, value, key, value, ...
  const Value* callable = nullptr;  // object: the class or function that makes it (a global)
  const Value* args = nullptr;      // object: the arguments it was made with (a tuple)
  const Value* state = nullptr;     // object: what BUILD gave it (its __dict__), or null

  [[nodiscard]] bool is_global(std::string_view module, std::string_view global_name) const {
    return kind == Kind::kGlobal && text == module && name == global_name;
  }
};

// The values of one pickle; they live as long as it does (memo references share them).
class Unpickled {
 public:
  [[nodiscard]] const Value& root() const { return *root_; }

 private:
  friend Unpickled unpickle(std::string_view bytes);
  std::deque<Value> values_;
  const Value* root_ = nullptr;
};

// Throws PickleError: "pickle byte N: what is wrong".
Unpickled unpickle(std::string_view bytes);

// The kind's name as Python says it ("dict", "int", ...), for messages.
const char* kind_name(Kind kind);

// Writes a pickle (protocol 4 opcodes, no framing) one opcode at a time, as a stack machine:
// push values, then make containers and objects from them.
class Pickler {
 public:
  Pickler();
  void none();
  void boolean(bool v);
  void integer(std::int64_t v);
  void str(std::string_view v);
  void bytes(std::string_view v);
  void global(std::string_view module, std::string_view name);
  void mark();
  void tuple_from_mark();
  void empty_tuple();
  void empty_dict();
  void set_items_from_mark();  // pairs pushed since the mark into the dict below it
  void empty_set();
  void add_items_from_mark();  // items pushed since the mark into the set below it
  void new_object();           // class, args -> cls.__new__(cls, *args)
  void reduce();               // callable, args -> callable(*args)
  void build();                // object, state -> object with that __dict__
  std::string finish();        // STOP, and the bytes

 private:
  std::string out_;
};

}  // namespace gpuorch::launch::pickle
