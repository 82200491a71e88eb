//! The JSON codec against nanobot's own files and Python's own encoder.

mod common;

use common::{fixture, jsonl_files, python};
use nanogate::json::Json;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// Every JSONL file nanobot wrote, in both generations.
fn fixture_jsonl() -> Vec<std::path::PathBuf> {
    let mut files = jsonl_files(&fixture("nanobot-0.1.4/workspace/sessions"));
    files.extend(jsonl_files(&fixture("nanobot-0.3.5/sessions")));
    files.push(fixture("nanobot-0.3.5/workspace/memory/history.jsonl"));
    files
}

#[test]
fn every_fixture_line_decodes_and_reencodes_to_identical_bytes() {
    let mut checked = 0;
    let mut unparsable = Vec::new();
    for path in fixture_jsonl() {
        let text = std::fs::read_to_string(&path).expect("fixture is UTF-8");
        for line in text.split('\n').filter(|l| !l.is_empty()) {
            match Json::parse(line) {
                Ok(v) => {
                    assert_eq!(v.to_python(), line, "{}", path.display());
                    checked += 1;
                }
                Err(_) => unparsable.push(line.to_owned()),
            }
        }
    }
    assert!(checked > 100, "only {checked} lines checked");
    // The one line that is not JSON was put there by hand (fixtures/README.md).
    assert_eq!(unparsable, vec!["{this is not json".to_owned()]);
}

#[test]
fn indented_fixture_files_reencode_identically() {
    for (rel, trailing_newline) in [
        ("nanobot-0.1.4/cron/jobs.json", false),
        ("nanobot-0.3.5/workspace/cron/jobs.json", false),
        ("nanobot-0.1.4/history.json", true),
        ("nanobot-0.1.4/filenames.json", true),
        ("nanobot-0.3.5/history.json", true),
    ] {
        let text = std::fs::read_to_string(fixture(rel)).expect("fixture");
        let body = if trailing_newline {
            text.strip_suffix('\n').expect("newline")
        } else {
            &text
        };
        let v = Json::parse(body).expect("valid JSON");
        assert_eq!(v.to_python_indent(2), body, "{rel}");
    }
}

fn special_char() -> impl Strategy<Value = char> {
    let mut chars: Vec<char> = (0u8..0x20).map(char::from).collect();
    chars.extend([
        '"', '\\', '/', '\u{7f}', '\u{80}', '\u{85}', '\u{a0}', '\u{2028}', '\u{2029}', '\u{feff}',
    ]);
    chars.extend(['é', '中', '🙂', '𝄞', '\u{10ffff}', '\u{e000}', 'a', ' ']);
    prop::sample::select(chars)
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(special_char(), 0..24).prop_map(|v| v.into_iter().collect())
    ]
}

fn big_int() -> impl Strategy<Value = Json> {
    (
        any::<bool>(),
        1u8..10,
        prop::collection::vec(0u8..10, 18..45),
    )
        .prop_map(|(neg, first, rest)| {
            let digits: String = std::iter::once(first)
                .chain(rest)
                .map(|d| char::from(b'0' + d))
                .collect();
            Json::parse(&format!("{}{digits}", if neg { "-" } else { "" })).expect("integer")
        })
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        prop::sample::select(vec![
            1e16,
            1e15,
            1e-5,
            1e-4,
            -0.0,
            0.0,
            0.1,
            2.0,
            1e22,
            5e-324,
            1.7976931348623157e308
        ]),
        (-1e6f64..1e6),
        (-30i32..30).prop_map(|e| 10f64.powi(e)),
    ]
}

fn value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        big_int(),
        float().prop_map(Json::from),
        text().prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|kv| Json::Object(kv.into_iter().collect())),
        ]
    })
}

/// Generated values, encoded by nanogate, must equal `json.dumps(json.loads(ours), ensure_ascii=False)`:
/// any difference in escaping, spacing or float text shows up as a mismatch.
#[test]
fn encoder_matches_python_json_dumps_on_generated_values() {
    let mut runner = TestRunner::default();
    let strategy = value();
    let mut lines = Vec::new();
    for _ in 0..3000 {
        let v = strategy.new_tree(&mut runner).expect("value").current();
        lines.push(v.to_python());
    }
    // Objects at the top level too, as session lines are.
    let strategy = prop::collection::vec((text(), value()), 0..8)
        .prop_map(|kv| Json::Object(kv.into_iter().collect()));
    for _ in 0..500 {
        lines.push(
            strategy
                .new_tree(&mut runner)
                .expect("value")
                .current()
                .to_python(),
        );
    }
    let input = lines.join("\n");
    let script = r#"
import json, sys
lines = sys.stdin.buffer.read().decode("utf-8").split("\n")
out = [json.dumps(json.loads(l), ensure_ascii=False) for l in lines]
sys.stdout.buffer.write("\n".join(out).encode("utf-8"))
"#;
    let out = String::from_utf8(python(script, input.as_bytes())).expect("python wrote UTF-8");
    let theirs: Vec<&str> = out.split('\n').collect();
    assert_eq!(theirs.len(), lines.len());
    for (ours, theirs) in lines.iter().zip(theirs) {
        assert_eq!(ours, theirs, "nanogate's encoding differs from Python's");
        let back = Json::parse(theirs).expect("Python's output parses");
        assert_eq!(
            &back.to_python(),
            theirs,
            "Python's output does not round-trip"
        );
    }
}

#[test]
fn float_text_matches_python_repr() {
    let mut runner = TestRunner::default();
    let strategy = float();
    let xs: Vec<f64> = (0..5000)
        .map(|_| strategy.new_tree(&mut runner).expect("float").current())
        .collect();
    let input: String = xs.iter().map(|x| format!("{:?}\n", x.to_bits())).collect();
    let script = r#"
import json, struct, sys
for l in sys.stdin.read().split():
    x = struct.unpack("<d", struct.pack("<Q", int(l)))[0]
    print(json.dumps(x))
"#;
    let out = String::from_utf8(python(script, input.as_bytes())).expect("utf-8");
    for (x, theirs) in xs.iter().zip(out.lines()) {
        assert_eq!(
            Json::from(*x).to_python(),
            theirs,
            "bits {:#x}",
            x.to_bits()
        );
    }
}
