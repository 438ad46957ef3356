//! The nearest known word to a misspelt one, for "did you mean" hints: a
//! condition type an expression names that no resource carries, a flag
//! nobody defines.

/// Words longer than this are compared as unequal: a hint is for typing
/// mistakes, and the distance costs `O(len²)`.
const MAX_LEN: usize = 64;

/// The candidate closest to `word` (ASCII case ignored: no Unicode case
/// tables in a binary with a size budget), when close enough to be
/// a slip of the keyboard: one edit for words of up to four characters, two
/// beyond, or the same word in another case. Ties go to the first.
pub(crate) fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let allowed = if word.chars().count() <= 4 { 1 } else { 2 };
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == word {
            continue;
        }
        let Some(d) = distance(&word.to_ascii_lowercase(), &candidate.to_ascii_lowercase()) else { continue };
        if d <= allowed && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance over characters; `None` past [`MAX_LEN`].
fn distance(a: &str, b: &str) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > MAX_LEN || b.len() > MAX_LEN {
        return None;
    }
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    Some(previous[b.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_of_the_keyboard_finds_its_word() {
        let seen = ["Ready", "Migrating", "Degraded"];
        assert_eq!(nearest("Migratng", seen), Some("Migrating"));
        assert_eq!(nearest("migrating", seen), Some("Migrating"));
        assert_eq!(nearest("Degarded", seen), Some("Degraded"));
        assert_eq!(nearest("--intervl", ["--interval", "--listen"]), Some("--interval"));
    }

    #[test]
    fn nothing_close_is_no_hint() {
        let seen = ["Ready", "Migrating"];
        assert_eq!(nearest("Broken", seen), None);
        assert_eq!(nearest("Ready", seen), None, "the word itself is no hint");
        assert_eq!(nearest("Rdy", ["Ready"]), None, "short words allow one edit");
        assert_eq!(nearest(&"x".repeat(100), [&*"x".repeat(99)]), None, "long words are not compared");
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("kitten", "sitting"), Some(3));
        assert_eq!(distance("", "abc"), Some(3));
        assert_eq!(distance("same", "same"), Some(0));
    }
}
