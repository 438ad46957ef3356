//! Text from outside (a server's error details, a published status read
//! back, a `Status` message) made safe to log, publish and print.
//!
//! [`sanitize`] is the one place foreign text passes before it reaches a log
//! line, the ConfigMap or a terminal: an ESC sequence or a bare CR from a
//! server could otherwise rewrite an admin's terminal or forge log lines,
//! and an unbounded message would grow every object it is copied into.

/// How much foreign text is kept: a `Status` message or a registration
/// error is a sentence; more is a broken or hostile server.
pub(crate) const MAX_FOREIGN: usize = 1024;

/// `text` with every control character (C0 including ESC, CR, LF and TAB,
/// DEL, C1) and every bidirectional override turned into a space, cut to
/// at most `max` bytes on a character boundary (an ellipsis marks the cut).
pub(crate) fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        // The Unicode controls that reorder displayed text ("Trojan Source").
        let bidi =
            matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}');
        let c = if c.is_control() || bidi { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            // Make room for the ellipsis (3 bytes) within `max`.
            while out.len() + '…'.len_utf8() > max && out.pop().is_some() {}
            if out.len() + '…'.len_utf8() <= max {
                out.push('…');
            }
            return out;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_spaces() {
        let hostile = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\rforged\nline\tand\u{7f}\u{9b}31m\u{202e}txt";
        let clean = sanitize(hostile, MAX_FOREIGN);
        assert_eq!(clean, "ok [2J ]0;pwned  forged line and  31m txt");
        assert!(!clean.chars().any(|c| c.is_control()));
    }

    #[test]
    fn printable_text_is_kept_as_it_is() {
        let text = "configmaps \"x\" is forbidden: User \"system:serviceaccount:ops:op\" — ünïcode";
        assert_eq!(sanitize(text, MAX_FOREIGN), text);
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary_within_the_cap() {
        let cut = sanitize(&"é".repeat(2000), MAX_FOREIGN);
        assert!(cut.len() <= MAX_FOREIGN && cut.ends_with('…'), "{}", cut.len());
        assert!(cut.len() >= MAX_FOREIGN - 4);
        assert_eq!(sanitize("abcdef", 6), "abcdef");
        assert_eq!(sanitize("abcdefg", 6), "abc…");
        assert_eq!(sanitize("abcdefg", 2), "", "no room for the ellipsis");
    }
}
