//! A JSON value that survives a round trip through nanobot's files byte for byte.
//!
//! nanobot writes every line with Python's `json.dumps(obj, ensure_ascii=False)`. To read those lines and write
//! them back unchanged, a value must keep the order of object keys and the exact text of every number (Python
//! prints `1e-05`, `1e+16` and integers of any size). serde_json can do this only with global feature flags
//! (`preserve_order`, `arbitrary_precision`) that change how every other crate in the binary parses JSON, so
//! the session files get this small codec of their own:
//!
//! - [`Json::parse`] reads what Python's `json.loads` reads (including `NaN` and `Infinity`), except a lone
//!   UTF-16 surrogate escape, which Python can load but never write back to a UTF-8 file;
//! - [`Json::to_python`] writes exactly what `json.dumps(value, ensure_ascii=False)` writes, and
//!   [`Json::to_python_indent`] what `json.dumps(value, ensure_ascii=False, indent=N)` writes;
//! - [`validate`] checks a line without building a value, so loading a large session stays cheap.

mod encode;
mod number;
mod parse;

pub use number::Number;
pub use parse::{LineShape, ParseError, validate};

/// A parsed JSON value with ordered object keys and number text kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// Any number, as its original text.
    Number(Number),
    /// A string (always valid Unicode: lone surrogates are rejected when parsing).
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object whose keys keep their order.
    Object(Object),
}

/// A JSON object: key/value pairs in insertion order, as a Python `dict` keeps them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object(Vec<(String, Json)>);

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// The value under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A mutable reference to the value under `key`, if present.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` like Python's `d[key] = value`: an existing key keeps its position, a new one goes last.
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        match self.get_mut(&key) {
            Some(slot) => *slot = value,
            None => self.0.push((key, value)),
        }
    }

    /// Removes `key` and returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, Json)> for Object {
    fn from_iter<I: IntoIterator<Item = (String, Json)>>(iter: I) -> Self {
        let mut obj = Object::new();
        for (k, v) in iter {
            obj.insert(k, v);
        }
        obj
    }
}

impl IntoIterator for Object {
    type Item = (String, Json);
    type IntoIter = std::vec::IntoIter<(String, Json)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl Json {
    /// Parses one JSON document, as Python's `json.loads` would.
    pub fn parse(text: &str) -> Result<Json, ParseError> {
        parse::parse(text)
    }

    /// The text `json.dumps(self, ensure_ascii=False)` produces.
    pub fn to_python(&self) -> String {
        let mut out = String::new();
        encode::write_compact(self, &mut out);
        out
    }

    /// Appends the text `json.dumps(self, ensure_ascii=False)` produces to `out`.
    pub fn write_python(&self, out: &mut String) {
        encode::write_compact(self, out);
    }

    /// The text `json.dumps(self, ensure_ascii=False, indent=indent)` produces.
    pub fn to_python_indent(&self, indent: usize) -> String {
        let mut out = String::new();
        encode::write_indented(self, indent, 0, &mut out);
        out
    }

    /// A JSON string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::String(s.into())
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object inside, if this is an object.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The mutable object inside, if this is an object.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array inside, if this is an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The number as a `u64`, if it is a non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// The number as an `f64` (integers included), if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::String(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Self {
        Json::String(s)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Self {
        Json::Number(Number::from(n))
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Self {
        Json::Number(Number::from(n))
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Self {
        Json::Number(Number::from(n as u64))
    }
}

impl From<f64> for Json {
    fn from(x: f64) -> Self {
        Json::Number(Number::from_f64(x))
    }
}

impl From<Object> for Json {
    fn from(o: Object) -> Self {
        Json::Object(o)
    }
}

impl From<Vec<Json>> for Json {
    fn from(a: Vec<Json>) -> Self {
        Json::Array(a)
    }
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_python())
    }
}
