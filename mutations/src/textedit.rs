//! Byte-range edits of one file's text, applied back to front.
//!
//! Guarantees: every edit's range refers to the *original* text; edits are
//! applied from the end of the file towards its start, so no edit shifts the
//! range of one not yet applied; bytes outside every edit's range come out
//! identical. Replacements may not overlap one another, and an insertion may
//! not fall strictly inside a replacement ([`apply`] refuses both). Several
//! insertions at the same offset come out in ascending `order`.

use std::ops::Range;

/// One edit: replace `range` (empty for an insertion) by `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub text: String,
    /// Among edits at the same offset, lower comes first in the result.
    pub order: (u8, i64, i64),
}

impl Edit {
    /// Replaces `range` with `text`.
    pub fn replace(range: Range<usize>, text: impl Into<String>) -> Edit {
        Edit {
            range,
            text: text.into(),
            order: (0, 0, 0),
        }
    }

    /// Inserts `text` at `at`, ordered by `order` among insertions there.
    pub fn insert(at: usize, text: impl Into<String>, order: (u8, i64, i64)) -> Edit {
        Edit {
            range: at..at,
            text: text.into(),
            order,
        }
    }
}

/// Two edits that cannot both be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub first: Range<usize>,
    pub second: Range<usize>,
}

/// Applies `edits` to `src`, back to front.
pub fn apply(src: &str, edits: &[Edit]) -> Result<String, Conflict> {
    for (i, a) in edits.iter().enumerate() {
        assert!(
            a.range.start <= a.range.end && a.range.end <= src.len(),
            "edit {:?} outside a {}-byte text",
            a.range,
            src.len()
        );
        for b in &edits[i + 1..] {
            let overlap = if a.range.is_empty() && b.range.is_empty() {
                false
            } else if a.range.is_empty() {
                b.range.start < a.range.start && a.range.start < b.range.end
            } else if b.range.is_empty() {
                a.range.start < b.range.start && b.range.start < a.range.end
            } else {
                a.range.start < b.range.end && b.range.start < a.range.end
            };
            if overlap {
                return Err(Conflict {
                    first: a.range.clone(),
                    second: b.range.clone(),
                });
            }
        }
    }
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    // Forward order: by start; at one offset insertions by `order`, and a
    // replacement after the insertions that precede it.
    sorted.sort_by(|a, b| {
        a.range
            .start
            .cmp(&b.range.start)
            .then(a.range.is_empty().cmp(&b.range.is_empty()).reverse())
            .then(a.order.cmp(&b.order))
    });
    let mut out = src.to_string();
    for e in sorted.iter().rev() {
        out.replace_range(e.range.clone(), &e.text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_refer_to_the_original_text() {
        let src = "abcdefghij";
        let out = apply(
            src,
            &[
                Edit::replace(2..4, "XY_"),
                Edit::insert(0, "<", (0, 0, 0)),
                Edit::replace(6..7, ""),
                Edit::insert(10, ">", (0, 0, 0)),
            ],
        )
        .unwrap();
        assert_eq!(out, "<abXY_efhij>");
    }

    #[test]
    fn insertions_at_one_offset_follow_order() {
        let out = apply(
            "x",
            &[
                Edit::insert(0, "b", (1, 0, 0)),
                Edit::insert(0, "a", (0, 5, 0)),
                Edit::insert(0, "c", (1, 0, 1)),
                Edit::insert(1, "!", (0, 0, 0)),
            ],
        )
        .unwrap();
        assert_eq!(out, "abcx!");
    }

    #[test]
    fn overlaps_are_refused() {
        assert!(
            apply(
                "abcdef",
                &[Edit::replace(0..3, ""), Edit::replace(2..4, "")]
            )
            .is_err()
        );
        assert!(
            apply(
                "abcdef",
                &[Edit::replace(0..3, ""), Edit::insert(1, "x", (0, 0, 0))]
            )
            .is_err()
        );
        assert_eq!(
            apply(
                "abcdef",
                &[Edit::replace(0..3, "Z"), Edit::insert(3, "x", (0, 0, 0))]
            )
            .unwrap(),
            "Zxdef"
        );
    }
}
