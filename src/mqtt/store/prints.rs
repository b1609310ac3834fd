//! The store's hashes: a topic's 64-bit fingerprint (the key of its bookkeeping) and a payload's
//! 48-bit print (what was published or is wanted there), and the words that carry a print in
//! their low bits.

/// Bits of a payload's [`payload_print`].
pub(super) const PRINT_BITS: u32 = 48;
pub(super) const PRINT_MASK: u64 = (1 << PRINT_BITS) - 1;

/// The payload print in the low [`PRINT_BITS`] bits of a word (a slot or a [`super::TopicState`]).
pub(super) fn print_of(word: u64) -> u64 {
    word & PRINT_MASK
}

/// `word` with `print` in its low [`PRINT_BITS`] bits, the bits above kept.
pub(super) fn with_print(word: u64, print: u64) -> u64 {
    (word & !PRINT_MASK) | (print & PRINT_MASK)
}

/// The hasher of [`fingerprint`]: fixed, so equal texts always agree.
const FINGERPRINT: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x6361_7361_6d62_6932);

/// A topic's 64-bit fingerprint, the key of its bookkeeping: two of a site's 400,000 topics
/// share one with a probability of about 4·10⁻⁹ (they would then share their bookkeeping).
/// Never 0 (taken as 1).
pub(super) fn fingerprint(text: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&FINGERPRINT, text).max(1)
}

/// A payload's 48-bit print. Two different payloads of one topic agree with a probability of
/// 2⁻⁴⁸ (one in 280 million million changes): the store would then skip one publication, until
/// the next change of that topic. Never 0, which [`super::TopicState::published`] uses for "nothing".
pub(super) fn payload_print(payload: &str) -> u64 {
    (fingerprint(payload) & PRINT_MASK).max(1)
}
