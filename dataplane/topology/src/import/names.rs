//! Switch names made from node labels.
//!
//! A switch name becomes a network namespace (`lcmptb-<testbed>-<name>`),
//! and `with_generated_hosts` names its hosts `<name>h1`, `<name>h2`, ...
//! Names are therefore kept to lowercase ASCII letters and digits, start
//! with a letter, and are at most [`MAX_SWITCH_NAME`] bytes, so that a host
//! name `<name>h<nn>` still fits in a Linux interface name (15 bytes) should
//! anything use it as one.

/// Longest switch name produced (12 + `h` + two digits = 15 bytes).
pub const MAX_SWITCH_NAME: usize = 12;

/// Unique safe names for `labels`, in order.
///
/// A label keeps its ASCII letters and digits, lowercased (`"New York"` ->
/// `newyork`); one that does not start with a letter gets an `n` in front
/// (`"0"` -> `n0`), and one with no ASCII letter or digit at all becomes
/// `n<index>`. Names are cut to [`MAX_SWITCH_NAME`] bytes. A name already
/// taken, or one that `with_generated_hosts` could produce for another
/// switch (`ah1` next to `a`), gets the smallest number 2, 3, ... that
/// makes it free, after an `x` where the name ends in a digit or `h`
/// (`paris`, `paris2`; `n0`, `n0x2`), cutting the base to make room.
pub fn safe_names(labels: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(labels.len());
    for (index, label) in labels.iter().enumerate() {
        let mut base: String = label
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if base.is_empty() {
            base = format!("n{index}");
        } else if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
            base.insert(0, 'n');
        }
        base.truncate(MAX_SWITCH_NAME);
        let mut name = base.clone();
        let mut n = 2usize;
        while names.iter().any(|taken| clashes(taken, &name)) {
            let n_text = n.to_string();
            let mut cut = base.clone();
            // Room for the number and a possible `x`.
            cut.truncate(MAX_SWITCH_NAME - n_text.len() - 1);
            // After a digit or an `h` the number would run on
            // (`n0` + `2`) or make a host name (`bh` + `2`); an `x`
            // between keeps every suffixed name free of both.
            let sep = if cut.ends_with(|c: char| c.is_ascii_digit() || c == 'h') {
                "x"
            } else {
                ""
            };
            name = format!("{cut}{sep}{n_text}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// Whether switch names `a` and `b` collide, directly or through the
/// generated host names `<switch>h<digits>`.
fn clashes(a: &str, b: &str) -> bool {
    a == b || is_host_of(a, b) || is_host_of(b, a)
}

/// Whether `name` has the form `<switch>h<digits>`.
fn is_host_of(name: &str, switch: &str) -> bool {
    name.strip_prefix(switch)
        .and_then(|rest| rest.strip_prefix('h'))
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(labels: &[&str]) -> Vec<String> {
        safe_names(&labels.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn cleaned_and_unique() {
        assert_eq!(
            names(&["New York", "Zürich", "0", "!!", "Washington DC", "NL"]),
            ["newyork", "zrich", "n0", "n3", "washingtondc", "nl"]
        );
        // "Frankfurt am Main" -> "frankfurtamm" (12 bytes); the second one
        // is cut to 12 - 1 (number) - 1 (room for an x) = 10 bytes
        // "frankfurta" + "2". A duplicate "n0" gets "x2" so that it does not
        // read as "n02".
        assert_eq!(
            names(&[
                "Frankfurt am Main",
                "Frankfurt am Main 2",
                "paris",
                "Paris",
                "0",
                "0"
            ]),
            [
                "frankfurtamm",
                "frankfurta2",
                "paris",
                "paris2",
                "n0",
                "n0x2"
            ]
        );
    }

    #[test]
    fn no_clash_with_generated_hosts() {
        // "ah1" would be host 1 of switch "a" -> "ah1x2" (not a host name:
        // the digits follow an x). "b" would own host "bh2" -> "b2".
        assert_eq!(
            names(&["a", "ah1", "bh2", "b"]),
            ["a", "ah1x2", "bh2", "b2"]
        );
    }
}
