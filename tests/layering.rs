//! The house rules, read from the code's own imports: every `crate::…` and `super::…` path in
//! `src/` is an edge from the file that names it to the file that defines the module it
//! reaches. The layers below are the architecture; an edge may only run to a layer at or
//! below its own, and neither the modules nor the files may form a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first. A module may use modules of its own layer or
/// below, never above.
const LAYERS: &[(&str, &[&str])] = &[
    ("facts and time", &["jito", "clock", "proto"]),
    ("codecs", &["wire", "jsonrpc", "http1", "h2", "grpc", "tls"]),
    ("egress protocols", &["egress"]),
    (
        "state",
        &[
            "arena", "bundle", "journal", "limiter", "log", "mesh", "quota",
        ],
    ),
    ("metrics", &["metrics"]),
    ("config", &["config"]),
    ("relay core (sans-IO)", &["relay"]),
    ("I/O shell", &["reactor", "admin", "probe", "notify"]),
    ("runtime", &["runtime", "budget", "serve"]),
    ("tools", &["hist", "fuzz", "check_host"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// Every `.rs` file under `src/` (but `main.rs` and `lib.rs`, the roots) with its module path.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let file = parts.pop().unwrap();
            let stem = file.trim_end_matches(".rs");
            if parts.is_empty() && (stem == "main" || stem == "lib") {
                continue;
            }
            if stem != "mod" {
                parts.push(stem.to_string());
            }
            out.insert(parts, path);
        }
    }
    out
}

/// Expands `a::{b, c::{d, e}}` into every full path it names.
fn expand(path: &str) -> Vec<String> {
    let path: String = path.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = path.find('{') else {
        return vec![path];
    };
    let prefix = &path[..open];
    let inner = &path[open + 1..path.rfind('}').unwrap_or(path.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .collect()
}

/// The paths a file names that start at `crate::` or `super::`: `use` items (braces expanded)
/// and paths written inline. Comments are skipped.
fn paths_in(text: &str) -> Vec<String> {
    let mut code = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        code.push_str(line);
        code.push('\n');
    }
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let starts = rest.starts_with("crate::")
            || rest.starts_with("super::")
            || rest.starts_with("self::");
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !(starts && boundary) {
            i += 1;
            continue;
        }
        // Take the path, with a brace group when one follows.
        let mut end = i;
        let mut depth = 0i32;
        while end < bytes.len() {
            let c = bytes[end] as char;
            match c {
                '{' => depth += 1,
                '}' if depth > 0 => depth -= 1,
                c if c.is_alphanumeric() || c == '_' || c == ':' => {}
                ',' | ' ' | '\n' if depth > 0 => {}
                _ if depth > 0 => {}
                _ => break,
            }
            end += 1;
            if depth == 0 && bytes.get(end - 1) == Some(&b'}') {
                break;
            }
        }
        out.extend(expand(&code[i..end]));
        i = end.max(i + 1);
    }
    out
}

/// `text` with every path that starts at one of its own child modules (`mod x;` then
/// `x::Y` or `use x::Y`) written as `self::x::…`, so it reads as an edge to that child.
fn with_self(text: &str) -> String {
    let children: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    'scan: while i < text.len() {
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        if boundary {
            for c in &children {
                if text[i..].starts_with(c) && text[i + c.len()..].starts_with("::") {
                    out.push_str("self::");
                    out.push_str(c);
                    i += c.len();
                    continue 'scan;
                }
            }
        }
        let ch = text[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The file module a path reaches from module `from`: the longest module prefix of it.
fn resolve(
    from: &[String],
    path: &str,
    mods: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match *segs.first()? {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => {
            let mut b = from.to_vec();
            b.pop();
            b
        }
        _ => return None,
    };
    segs.remove(0);
    while segs.first() == Some(&"super") {
        base.pop();
        segs.remove(0);
    }
    let mut best = None;
    let mut cur = base.clone();
    if mods.contains_key(&cur) {
        best = Some(cur.clone());
    }
    for s in segs {
        cur.push(s.to_string());
        if mods.contains_key(&cur) {
            best = Some(cur.clone());
        } else {
            break;
        }
    }
    best
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, path) in &mods {
        let text = std::fs::read_to_string(path).unwrap();
        // Unit tests sit at the end of a file in a `#[cfg(test)]` module of their own: what
        // they import is not the architecture (and their `super` is the file itself).
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        let set = edges.entry(m.clone()).or_default();
        for p in paths_in(&with_self(text)) {
            if let Some(to) = resolve(m, &p, &mods)
                && &to != m
            {
                set.insert(to);
            }
        }
    }
    edges
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// One circle in `edges`, if there is any.
fn find_cycle<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Option<Vec<N>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<N: Ord + Clone>(
        n: &N,
        edges: &BTreeMap<N, BTreeSet<N>>,
        marks: &mut BTreeMap<N, Mark>,
        stack: &mut Vec<N>,
    ) -> Option<Vec<N>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let at = stack.iter().position(|s| s == n).unwrap();
                let mut c = stack[at..].to_vec();
                c.push(n.clone());
                return Some(c);
            }
            None => {}
        }
        marks.insert(n.clone(), Mark::Open);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(n.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// Every group of nodes that reach one another (the circles), each sorted.
fn circles<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    let reach = |from: &N| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<N, BTreeSet<N>> = edges.keys().map(|n| (n.clone(), reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in edges.keys() {
        if done.contains(n) || !reaches[n].contains(n) {
            continue;
        }
        let group: Vec<N> = reaches[n]
            .iter()
            .filter(|m| reaches.get(*m).is_some_and(|r| r.contains(n)))
            .cloned()
            .collect();
        done.extend(group.iter().cloned());
        out.push(group);
    }
    out
}

#[test]
fn the_path_reader_sees_use_groups_inline_paths_and_super() {
    let text = "use crate::relay::{Spec, dispatch::{Dispatcher, Link}};\n\
                // crate::ignored::in_comment\n\
                fn f() { crate::clock::Instant(0); super::sibling::g(); }";
    let got = paths_in(text);
    assert_eq!(
        got,
        [
            "crate::relay::Spec",
            "crate::relay::dispatch::Dispatcher",
            "crate::relay::dispatch::Link",
            "crate::clock::Instant",
            "super::sibling::g",
        ]
    );
}

#[test]
fn the_cycle_finder_finds_a_circle_and_passes_a_tree() {
    let mut e: BTreeMap<u8, BTreeSet<u8>> = BTreeMap::new();
    e.entry(1).or_default().insert(2);
    e.entry(2).or_default().insert(3);
    assert_eq!(find_cycle(&e), None);
    e.entry(3).or_default().insert(1);
    assert_eq!(find_cycle(&e), Some(vec![1, 2, 3, 1]));
}

#[test]
fn every_top_level_module_has_a_layer() {
    let g = graph();
    let tops: BTreeSet<String> = g.keys().filter_map(|m| m.first().cloned()).collect();
    let missing: Vec<&String> = tops.iter().filter(|t| layer_of(t).is_none()).collect();
    assert!(
        missing.is_empty(),
        "modules with no layer in LAYERS: {missing:?}"
    );
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let mut wrong = Vec::new();
    for (from, tos) in graph() {
        let (Some(f), true) = (from.first(), !from.is_empty()) else {
            continue;
        };
        for to in tos {
            let Some(t) = to.first() else { continue };
            if let (Some(lf), Some(lt)) = (layer_of(f), layer_of(t))
                && lt > lf
            {
                wrong.push(format!(
                    "{} ({}) uses {} ({})",
                    name(&from),
                    LAYERS[lf].0,
                    name(&to),
                    LAYERS[lt].0
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports running up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn top_level_modules_form_no_circle() {
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in graph() {
        let Some(f) = from.first() else { continue };
        let set = tops.entry(f.clone()).or_default();
        for to in tos {
            if let Some(t) = to.first()
                && t != f
            {
                set.insert(t.clone());
            }
        }
    }
    let found = circles(&tops);
    assert!(
        found.is_empty(),
        "circles between modules: {found:?} (one: {:?})",
        find_cycle(&tops)
    );
}

#[test]
fn files_form_no_circle() {
    let g = graph();
    let found: Vec<Vec<String>> = circles(&g)
        .iter()
        .map(|c| c.iter().map(|m| name(m)).collect())
        .collect();
    assert!(found.is_empty(), "circles between files:\n{found:#?}");
}
