//! Untrusted text made inert for a page.
//!
//! Guarantees: [`visible`] returns the text with every control character,
//! bidirectional control (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, LRM,
//! RLM, ALM) and invisible format character (zero-width ones, the BOM, soft
//! hyphen, tag characters, interlinear annotations) replaced by its code
//! point spelled out, `[U+202E]`: what a reader sees is every character
//! that is there, in the order it is stored. HTML escaping is maud's, on
//! top of this.

/// True for a character that would be invisible or reorder what follows.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// The text with every hidden character spelled out as `[U+XXXX]`.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("[U+{:04X}]", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_zero_width_and_control_characters_are_spelled_out() {
        assert_eq!(visible("abc\u{202E}gpj.exe"), "abc[U+202E]gpj.exe");
        assert_eq!(
            visible("a\u{200B}b\u{FEFF}\n"),
            "a[U+200B]b[U+FEFF][U+000A]"
        );
        assert_eq!(visible("tag\u{E0041}"), "tag[U+E0041]");
        assert_eq!(visible("plain ₹ text"), "plain ₹ text");
    }
}
