// OrderedDict: named values in insertion order, as libtorch's
// torch::OrderedDict (what named_parameters() returns). It is a vector of
// items, each a std::pair with libtorch's key()/value() accessors, so both
// spellings work:
//   for (auto& p : m.named_parameters()) use(p.key(), p.value());
//   for (auto& [name, t] : m.named_parameters()) use(name, t);
//   m.named_parameters()["fc1.weight"];  m.named_parameters()[0].first;
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"

namespace kiln {

template <class Key, class Value>
class OrderedDict;

/// One entry: a std::pair whose first is the key and second the value.
template <class Key, class Value>
class OrderedDictItem : public std::pair<Key, Value> {
 public:
  using std::pair<Key, Value>::pair;
  OrderedDictItem(std::pair<Key, Value> p) : std::pair<Key, Value>(std::move(p)) {}  // NOLINT
  const Key& key() const { return this->first; }
  Value& value() { return this->second; }
  const Value& value() const { return this->second; }
  std::pair<Key, Value>& pair() { return *this; }
  const std::pair<Key, Value>& pair() const { return *this; }
  Value& operator*() { return this->second; }
  const Value& operator*() const { return this->second; }
  Value* operator->() { return &this->second; }
  const Value* operator->() const { return &this->second; }
};

template <class Key, class Value>
class OrderedDict : public std::vector<OrderedDictItem<Key, Value>> {
  using Base = std::vector<OrderedDictItem<Key, Value>>;

 public:
  using Item = OrderedDictItem<Key, Value>;
  using Base::Base;
  using Base::operator[];
  OrderedDict() = default;
  explicit OrderedDict(std::string key_description)
      : key_description_(std::move(key_description)) {}

  /// The value under `key`; an error naming the key when there is none.
  Value& operator[](const Key& key) { return at_key(key); }
  const Value& operator[](const Key& key) const {
    return const_cast<OrderedDict*>(this)->at_key(key);
  }
  /// A pointer to the value under `key`, or nullptr.
  Value* find(const Key& key) {
    for (Item& i : *this)
      if (i.first == key) return &i.second;
    return nullptr;
  }
  const Value* find(const Key& key) const { return const_cast<OrderedDict*>(this)->find(key); }
  bool contains(const Key& key) const { return find(key) != nullptr; }
  /// Appends; an error when the key is there already.
  Value& insert(Key key, Value value) {
    if (contains(key)) throw Error(key_description_ + " '" + key + "' already defined");
    this->emplace_back(std::move(key), std::move(value));
    return this->back().second;
  }
  std::vector<Key> keys() const {
    std::vector<Key> out;
    for (const Item& i : *this) out.push_back(i.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const Item& i : *this) out.push_back(i.second);
    return out;
  }
  const Base& items() const { return *this; }
  bool is_empty() const { return this->empty(); }
  const std::string& key_description() const { return key_description_; }

 private:
  Value& at_key(const Key& key) {
    if (Value* v = find(key)) return *v;
    throw Error(key_description_ + " '" + key + "' is not defined");
  }
  std::string key_description_ = "Key";
};

}  // namespace kiln
