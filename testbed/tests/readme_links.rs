//! Every relative link in README.md and docs/*.md resolves: the file (or
//! directory) exists, and a `#anchor` names a heading of the target file by
//! GitHub's rules (lowercase; letters, digits, `-` and `_` kept, spaces
//! become `-`, everything else dropped; a repeated heading gets `-1`, `-2`).
//! Links with a scheme (`http(s)://`, `mailto:`) are not checked. A small
//! scanner of its own: `[text](target)` and `[label]: target` outside fenced
//! code blocks and code spans, and ATX headings (`#` to `######`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: this crate is `testbed/`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every docs/*.md, relative to the root.
fn checked_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("a file name")))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A line that opens or closes a fenced code block: up to three spaces, then
/// at least three backticks or tildes. Returns the fence's character and
/// length.
fn fence(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = rest.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The blocks of a markdown file outside fenced code: each paragraph (lines
/// up to a blank line, a fence or a heading) with its first line number, and
/// each heading's text.
struct Parsed {
    paragraphs: Vec<(usize, String)>,
    headings: Vec<String>,
}

fn parse(text: &str) -> Parsed {
    let mut paragraphs = Vec::new();
    let mut headings = Vec::new();
    let mut open_fence: Option<(char, usize)> = None;
    let mut para = String::new();
    let mut para_line = 0;
    let flush = |para: &mut String, line: usize, out: &mut Vec<(usize, String)>| {
        if !para.is_empty() {
            out.push((line, std::mem::take(para)));
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((c, len)) = open_fence {
            if let Some((c2, len2)) = fence(line) {
                if c2 == c && len2 >= len && line.trim().chars().all(|x| x == c) {
                    open_fence = None;
                }
            }
            continue;
        }
        if let Some(f) = fence(line) {
            flush(&mut para, para_line, &mut paragraphs);
            open_fence = Some(f);
            continue;
        }
        if let Some(h) = heading(line) {
            flush(&mut para, para_line, &mut paragraphs);
            headings.push(h.to_string());
            paragraphs.push((n, h.to_string()));
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut para, para_line, &mut paragraphs);
            continue;
        }
        if para.is_empty() {
            para_line = n;
        } else {
            para.push('\n');
        }
        para.push_str(line);
    }
    flush(&mut para, para_line, &mut paragraphs);
    Parsed {
        paragraphs,
        headings,
    }
}

/// The text of an ATX heading line, without its markers.
fn heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !after.is_empty() && !after.starts_with(' ') && !after.starts_with('\t') {
        return None;
    }
    // An optional closing sequence of #s.
    let t = after.trim();
    let stripped = t.trim_end_matches('#');
    let t = if stripped.is_empty() || stripped.ends_with(' ') {
        stripped.trim_end()
    } else {
        t
    };
    Some(t)
}

/// `text` with its code spans removed (a run of n backticks up to the next
/// run of exactly n; an unclosed run stays as text).
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// The link targets of a paragraph (code spans already removed):
/// `[text](target "title")`, `![alt](target)` and `[label]: target`.
fn link_targets(para: &str) -> Vec<String> {
    let mut targets = Vec::new();
    // Reference definitions: `[label]: target` at the start of a line.
    for line in para.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix('[') {
            if let Some(close) = rest.find("]:").filter(|&c| !rest[..c].contains(']')) {
                let target = rest[close + 2..].split_whitespace().next().unwrap_or("");
                if !target.is_empty() {
                    targets.push(target.trim_matches(['<', '>']).to_string());
                }
            }
        }
    }
    // Inline links: `](` then the destination up to its balanced `)`.
    let bytes = para.as_bytes();
    let mut from = 0;
    while let Some(pos) = para[from..].find("](") {
        let start = from + pos + 2;
        let mut depth = 0usize;
        let mut end = None;
        for (k, &b) in bytes[start..].iter().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' if depth == 0 => {
                    end = Some(start + k);
                    break;
                }
                b')' => depth -= 1,
                b'\n' => break,
                _ => {}
            }
        }
        let Some(end) = end else {
            from = start;
            continue;
        };
        let inner = para[start..end].trim();
        let target = if let Some(angle) = inner.strip_prefix('<') {
            angle.split('>').next().unwrap_or("")
        } else {
            inner.split_whitespace().next().unwrap_or("")
        };
        targets.push(target.to_string());
        from = end;
    }
    targets
}

/// GitHub's anchor of a heading: inline links reduced to their text, then
/// lowercase, letters/digits/`-`/`_` kept, spaces to `-`, the rest dropped.
fn anchor(heading: &str) -> String {
    let text = without_code_spans_keep_text(heading);
    let text = links_to_text(&text);
    let mut out = String::new();
    for c in text.trim().chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            out.extend(c.to_lowercase());
        } else if c == ' ' {
            out.push('-');
        }
    }
    out
}

/// A heading's code spans keep their text (only the backticks go).
fn without_code_spans_keep_text(text: &str) -> String {
    text.replace('`', "")
}

/// `[text](target)` reduced to `text`.
fn links_to_text(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    out.push_str(rest);
    out
}

/// Every anchor of a file's headings, duplicates numbered as GitHub does.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    for h in parse(text).headings {
        let a = anchor(&h);
        let n = seen.entry(a.clone()).or_insert(0);
        let unique = if *n == 0 {
            a.clone()
        } else {
            format!("{a}-{n}")
        };
        *n += 1;
        out.insert(unique);
    }
    out
}

fn is_external(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || lower.contains("://")
}

/// The broken links of `file` (relative to `root`), as readable lines.
fn broken_links(
    root: &Path,
    file: &Path,
    cache: &mut HashMap<PathBuf, HashSet<String>>,
) -> Vec<String> {
    let text =
        fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (line, para) in parse(&text).paragraphs {
        for target in link_targets(&without_code_spans(&para)) {
            if target.is_empty() {
                broken.push(format!("{}:{line}: an empty link target", file.display()));
                continue;
            }
            if is_external(&target) {
                continue;
            }
            let (path, frag) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            let on_disk = root.join(&linked);
            if !on_disk.exists() {
                broken.push(format!(
                    "{}:{line}: {target}: {} does not exist",
                    file.display(),
                    linked.display()
                ));
                continue;
            }
            let Some(frag) = frag else { continue };
            if on_disk.extension().is_none_or(|x| x != "md") {
                broken.push(format!(
                    "{}:{line}: {target}: an anchor into a file that is not markdown",
                    file.display()
                ));
                continue;
            }
            let key = on_disk.canonicalize().unwrap_or(on_disk.clone());
            let set = cache
                .entry(key)
                .or_insert_with(|| anchors(&fs::read_to_string(&on_disk).unwrap_or_default()));
            if !set.contains(frag) {
                broken.push(format!(
                    "{}:{line}: {target}: no heading with anchor #{frag} in {}",
                    file.display(),
                    linked.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = root();
    let mut cache = HashMap::new();
    let files = checked_files(&root);
    assert!(files.len() > 1, "docs/*.md found: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = fs::read_to_string(root.join(file)).expect("readable");
        checked += parse(&text)
            .paragraphs
            .iter()
            .map(|(_, p)| link_targets(&without_code_spans(p)).len())
            .sum::<usize>();
        broken.extend(broken_links(&root, file, &mut cache));
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the scanner broken?"
    );
    assert!(
        broken.is_empty(),
        "{} broken link(s) in README.md and docs/*.md:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(anchor("Run the demo"), "run-the-demo");
    assert_eq!(
        anchor("The engines: namespaces, wall, virtual"),
        "the-engines-namespaces-wall-virtual"
    );
    assert_eq!(
        anchor("A rotor (Mars) experiment"),
        "a-rotor-mars-experiment"
    );
    assert_eq!(
        anchor("RDMA-faithful experiments: RoCEv2 + DCQCN, trace replay, fidelity"),
        "rdma-faithful-experiments-rocev2--dcqcn-trace-replay-fidelity"
    );
    assert_eq!(
        anchor("The all-pairs 8-DC traces (`experiments/8dc-allpairs-{0.3,0.5,0.8}.toml`)"),
        "the-all-pairs-8-dc-traces-experiments8dc-allpairs-030508toml"
    );
    assert_eq!(anchor("Testbeds: `lcmp-testbed`"), "testbeds-lcmp-testbed");
    assert_eq!(
        anchor("The paper's [Fig. 5](x.md) here"),
        "the-papers-fig-5-here"
    );
    let text = "# A\n\n## A\n\n```sh\n# not a heading\n```\n\n### A ###\n";
    let set = anchors(text);
    assert_eq!(set, HashSet::from(["a".into(), "a-1".into(), "a-2".into()]));
}

#[test]
fn the_scanner_finds_links_and_skips_code() {
    let para = "See [one](a.md#x), ![img](b.png \"t\") and `[not](c.md)`,\n\
                [two](<d e.md>) and [p](f(g).md).";
    assert_eq!(
        link_targets(&without_code_spans(para)),
        ["a.md#x", "b.png", "d e.md", "f(g).md"]
    );
    assert_eq!(link_targets("[ref]: docs/x.md#y"), ["docs/x.md#y"]);
    let text = "text\n\n```\n[fenced](nowhere.md)\n```\n\n[after](here.md)\n";
    let targets: Vec<String> = parse(text)
        .paragraphs
        .iter()
        .flat_map(|(_, p)| link_targets(p))
        .collect();
    assert_eq!(targets, ["here.md"]);
}

#[test]
fn a_broken_link_or_anchor_is_reported() {
    let dir = std::env::temp_dir().join(format!("readme-links-{}", std::process::id()));
    fs::create_dir_all(dir.join("docs")).expect("temp dir");
    fs::write(dir.join("docs/ok.md"), "# Here\n\n## There too\n").expect("write");
    fs::write(
        dir.join("README.md"),
        "[a](docs/ok.md#there-too) [b](docs/ok.md#nowhere) [c](docs/missing.md) \
         [d](#top) [e](https://example.com/x)\n\n# Top\n",
    )
    .expect("write");
    let mut cache = HashMap::new();
    let broken = broken_links(&dir, Path::new("README.md"), &mut cache);
    fs::remove_dir_all(&dir).ok();
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("#nowhere"), "{broken:?}");
    assert!(broken[1].contains("docs/missing.md"), "{broken:?}");
}
