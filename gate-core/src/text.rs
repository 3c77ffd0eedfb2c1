//! Free text a human reviewer must be able to read: the rules for `purpose`.
//!
//! Guarantees: [`check_purpose`] accepts 1 to [`MAX_PURPOSE_CHARS`]
//! characters with at least one visible character, and refuses, anywhere in
//! the text, a code point whose Unicode General_Category is Cc (control), Cf
//! (format: zero-width characters, BOM, bidirectional marks and overrides,
//! tag characters, interlinear annotation), Zl or Zp (line and paragraph
//! separators), Co (private use) or Cn (unassigned, which includes the
//! noncharacters), and any other Default_Ignorable_Code_Point (Hangul
//! fillers, the combining grapheme joiner, Khmer inherent vowels), plus
//! U+2800 BRAILLE PATTERN BLANK, a glyph drawn as nothing. Two narrow
//! exceptions keep real text working: ZWJ and ZWNJ directly after a virama
//! (canonical combining class 9, IDNA's CONTEXTJ rule), and one variation
//! selector directly after a visible character (an emoji's presentation
//! form). The properties come from ICU4X's Unicode data (`icu_properties`),
//! not from a hand-kept list.

use icu_properties::props::{
    CanonicalCombiningClass, DefaultIgnorableCodePoint, GeneralCategory, VariationSelector,
};
use icu_properties::{CodePointMapData, CodePointSetData};

/// The longest purpose, in Unicode scalar values.
pub const MAX_PURPOSE_CHARS: usize = 200;

const ZWNJ: char = '\u{200C}';
const ZWJ: char = '\u{200D}';
/// Drawn as an empty cell, yet General_Category So and not default-ignorable.
const BRAILLE_BLANK: char = '\u{2800}';

/// Why a purpose was refused (the caller answers `PURPOSE_INVALID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurposeProblem {
    Empty,
    TooLong,
    /// No character a reader can see.
    NothingVisible,
    /// The character at this index (in chars) may not appear.
    Forbidden {
        index: usize,
        code_point: u32,
    },
}

/// Checks a purpose against the rules above.
pub fn check_purpose(purpose: &str) -> Result<(), PurposeProblem> {
    if purpose.is_empty() {
        return Err(PurposeProblem::Empty);
    }
    if purpose.chars().count() > MAX_PURPOSE_CHARS {
        return Err(PurposeProblem::TooLong);
    }
    let mut previous: Option<char> = None;
    let mut any_visible = false;
    for (index, c) in purpose.chars().enumerate() {
        if !allowed_after(previous, c) {
            return Err(PurposeProblem::Forbidden {
                index,
                code_point: u32::from(c),
            });
        }
        any_visible |= is_visible(c);
        previous = Some(c);
    }
    if !any_visible {
        return Err(PurposeProblem::NothingVisible);
    }
    Ok(())
}

/// True for a character that draws something: a letter, number, punctuation
/// or symbol that is not default-ignorable and not the braille blank.
pub fn is_visible(c: char) -> bool {
    use GeneralCategory as G;
    let drawn = matches!(
        CodePointMapData::<GeneralCategory>::new().get(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
            | G::DecimalNumber
            | G::LetterNumber
            | G::OtherNumber
            | G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
            | G::MathSymbol
            | G::CurrencySymbol
            | G::ModifierSymbol
            | G::OtherSymbol
    );
    drawn && !is_default_ignorable(c) && c != BRAILLE_BLANK
}

fn is_default_ignorable(c: char) -> bool {
    CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// May `c` follow `previous` in a purpose?
fn allowed_after(previous: Option<char>, c: char) -> bool {
    use GeneralCategory as G;
    if c == ZWJ || c == ZWNJ {
        return previous.is_some_and(|p| {
            CodePointMapData::<CanonicalCombiningClass>::new().get(p)
                == CanonicalCombiningClass::Virama
        });
    }
    if CodePointSetData::new::<VariationSelector>().contains(c) {
        return previous.is_some_and(is_visible);
    }
    let category_refused = matches!(
        CodePointMapData::<GeneralCategory>::new().get(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    );
    if category_refused {
        return false;
    }
    if is_default_ignorable(c) {
        return false;
    }
    c != BRAILLE_BLANK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> bool {
        check_purpose(s).is_ok()
    }

    #[test]
    fn real_text_in_many_scripts_passes() {
        for s in [
            "team cloud credits",
            "क्‍ष सर्वर",                  // Devanagari: virama then ZWJ
            "क्‌ष",                       // virama then ZWNJ
            "cafe\u{301} cre\u{300}me", // combining accents after letters
            "renewal \u{2764}\u{FE0F}", // heart with its emoji presentation selector
            "₹500 / $20 / €5",
            "日本語の説明",
            "a  b\u{3000}c\u{A0}d", // spaces of several widths
        ] {
            assert!(ok(s), "{s:?} must pass");
        }
    }

    #[test]
    fn each_invisible_or_control_family_is_refused_inside_text() {
        for c in [
            '\u{0}',
            '\u{7}',
            '\u{1B}',
            '\u{85}', // controls
            '\u{2028}',
            '\u{2029}', // line and paragraph separators
            '\u{200B}',
            '\u{2060}',
            '\u{FEFF}', // zero-width space, word joiner, BOM
            '\u{200E}',
            '\u{200F}',
            '\u{061C}', // bidi marks
            '\u{202E}',
            '\u{2066}', // bidi override and isolate
            '\u{E0041}',
            '\u{E007F}', // tag characters
            '\u{FFF9}',
            '\u{FFFA}',
            '\u{FFFB}', // interlinear annotation
            '\u{3164}',
            '\u{115F}',
            '\u{FFA0}', // Hangul fillers
            '\u{2800}', // braille blank
            '\u{E000}',
            '\u{F8FF}', // private use
            '\u{FDD0}',
            '\u{FFFE}',
            '\u{10FFFF}', // noncharacters
            '\u{0378}',   // unassigned
            '\u{034F}',   // combining grapheme joiner
        ] {
            let s = format!("buy credits {c} now");
            assert!(
                matches!(check_purpose(&s), Err(PurposeProblem::Forbidden { .. })),
                "U+{:04X} must be refused",
                u32::from(c)
            );
        }
    }

    #[test]
    fn text_with_nothing_visible_is_refused() {
        for s in ["   ", "\u{301}\u{302}", "\u{3000}", " \u{301} "] {
            assert_eq!(
                check_purpose(s),
                Err(PurposeProblem::NothingVisible),
                "{s:?}"
            );
        }
        assert_eq!(check_purpose(""), Err(PurposeProblem::Empty));
        assert_eq!(
            check_purpose(&"x".repeat(201)),
            Err(PurposeProblem::TooLong)
        );
        assert!(ok(&"x".repeat(200)));
    }

    #[test]
    fn joiners_and_selectors_pass_only_in_their_narrow_context() {
        assert!(!ok("a\u{200D}b"), "ZWJ after a letter");
        assert!(!ok("\u{200D}क"), "ZWJ first");
        assert!(
            !ok("\u{1F468}\u{200D}\u{1F469}"),
            "ZWJ between emoji is not CONTEXTJ"
        );
        assert!(!ok("\u{FE0F}"), "a selector alone");
        assert!(!ok("x \u{FE0F}"), "a selector after a space");
        assert!(!ok("\u{2764}\u{FE0F}\u{FE0F}"), "two selectors");
        assert!(!ok("x\u{E0100}\u{E0100}"), "two ideographic selectors");
        assert!(ok("x\u{E0100}"), "one ideographic selector after a letter");
    }
}
