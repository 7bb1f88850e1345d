//! A checker for the Prometheus text exposition format 0.0.4, as much of it as a scraper relies
//! on: every sample line is `name{labels} value`; each family has HELP and TYPE once, before
//! its samples; histogram buckets ascend in `le`, are cumulative, end at `+Inf`, and `_count`
//! equals the `+Inf` bucket.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.as_str())
    }
}

pub struct Exposition {
    pub types: HashMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the sample `name` with exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels.iter().all(|(k, v)| s.label(k) == Some(*v))
            })
            .map(|s| s.value)
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .char_indices()
        .find(|&(i, c)| {
            if i == 0 {
                !is_name_start(c)
            } else {
                !is_name_char(c)
            }
        })
        .map(|(i, _)| i)
        .unwrap_or(line.len());
    if name_end == 0 {
        return Err(format!("no metric name: {line:?}"));
    }
    let name = line[..name_end].to_string();
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut r = r;
        loop {
            if let Some(after) = r.strip_prefix('}') {
                r = after;
                break;
            }
            let eq = r.find('=').ok_or(format!("label without '=': {line:?}"))?;
            let key = &r[..eq];
            if key.is_empty() || !key.chars().all(is_name_char) {
                return Err(format!("bad label name {key:?}: {line:?}"));
            }
            let r2 = r[eq + 1..]
                .strip_prefix('"')
                .ok_or(format!("label value not quoted: {line:?}"))?;
            let mut value = String::new();
            let mut it = r2.char_indices();
            let end = loop {
                match it.next() {
                    Some((_, '\\')) => match it.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        _ => return Err(format!("bad escape: {line:?}")),
                    },
                    Some((i, '"')) => break i,
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("unterminated label value: {line:?}")),
                }
            };
            labels.push((key.to_string(), value));
            r = &r2[end + 1..];
            if let Some(after) = r.strip_prefix(',') {
                r = after;
            }
        }
        rest = r;
    }
    let v = rest
        .strip_prefix(' ')
        .ok_or(format!("no space before value: {line:?}"))?;
    let value = match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v
            .parse::<f64>()
            .map_err(|e| format!("bad value {v:?} ({e}): {line:?}"))?,
    };
    Ok(Sample {
        name,
        labels,
        value,
    })
}

fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if types.get(base).is_some_and(|t| t == "histogram") {
                return base;
            }
        }
    }
    name
}

/// Parses and checks `text`; the error names the first rule broken.
pub fn check(text: &str) -> Result<Exposition, String> {
    let mut helps: HashMap<String, usize> = HashMap::new();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            *helps.entry(name.to_string()).or_default() += 1;
            if helps[name] > 1 {
                return Err(format!("HELP twice for {name}"));
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let (name, kind) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(format!("bad TYPE {kind:?} for {name}"));
            }
            if types.insert(name.to_string(), kind.to_string()).is_some() {
                return Err(format!("TYPE twice for {name}"));
            }
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else {
            let s = parse_sample(line)?;
            let fam = family_of(&s.name, &types);
            if !types.contains_key(fam) {
                return Err(format!("sample before its TYPE: {line:?}"));
            }
            if !helps.contains_key(fam) {
                return Err(format!("sample without HELP: {line:?}"));
            }
            if types[fam] == "counter" && !s.name.ends_with("_total") {
                return Err(format!("counter not named _total: {}", s.name));
            }
            samples.push(s);
        }
    }
    for (name, kind) in &types {
        if !helps.contains_key(name) {
            return Err(format!("TYPE without HELP: {name}"));
        }
        // OpenMetrics (and the clients that read this format by its rules) names a counter's
        // family without `_total`: another family of that name is the same family twice.
        if kind == "counter"
            && let Some(base) = name.strip_suffix("_total")
            && types.contains_key(base)
        {
            return Err(format!(
                "{name} (counter) and {base} ({}) are one family to OpenMetrics",
                types[base]
            ));
        }
        if kind == "histogram" {
            check_histogram(name, &samples)?;
        }
    }
    Ok(Exposition { types, samples })
}

fn key_without(labels: &[(String, String)], skip: &str) -> Vec<(String, String)> {
    labels.iter().filter(|(k, _)| k != skip).cloned().collect()
}

/// Labels other than `le`, and the (le, count) buckets of one histogram series.
type Buckets = BTreeMap<Vec<(String, String)>, Vec<(f64, f64)>>;

fn check_histogram(name: &str, samples: &[Sample]) -> Result<(), String> {
    let bucket = format!("{name}_bucket");
    let count = format!("{name}_count");
    let sum = format!("{name}_sum");
    let mut series: Buckets = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == bucket) {
        let le = s
            .label("le")
            .ok_or(format!("{bucket} without le"))?
            .parse::<f64>()
            .or_else(|_| {
                if s.label("le") == Some("+Inf") {
                    Ok(f64::INFINITY)
                } else {
                    Err(format!("bad le in {bucket}"))
                }
            })?;
        series
            .entry(key_without(&s.labels, "le"))
            .or_default()
            .push((le, s.value));
    }
    if series.is_empty() {
        return Err(format!("histogram {name} has no buckets"));
    }
    for (labels, buckets) in &series {
        for w in buckets.windows(2) {
            if w[1].0 <= w[0].0 {
                return Err(format!("{name}{labels:?}: le not ascending"));
            }
            if w[1].1 < w[0].1 {
                return Err(format!(
                    "{name}{labels:?}: buckets not cumulative at le {}",
                    w[1].0
                ));
            }
        }
        let last = buckets.last().expect("non-empty");
        if last.0 != f64::INFINITY {
            return Err(format!("{name}{labels:?}: last bucket is not +Inf"));
        }
        let find = |n: &str| {
            samples
                .iter()
                .find(|s| s.name == n && &s.labels == labels)
                .map(|s| s.value)
        };
        let c = find(&count).ok_or(format!("{name}{labels:?}: no _count"))?;
        if c != last.1 {
            return Err(format!(
                "{name}{labels:?}: _count {c} != +Inf bucket {}",
                last.1
            ));
        }
        find(&sum).ok_or(format!("{name}{labels:?}: no _sum"))?;
    }
    Ok(())
}
